"""The fault soak: its lab, the nemesis and the invariants it checks."""
