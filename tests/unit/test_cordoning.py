"""Cordoning at run time without a cluster: an in-memory broker config and store stand in for Kafka, so that the
order of record and write, a broker older than 4.3 and a refused path can be driven on purpose."""

from quota_sidecar.act.cordoning import Cordoner
from quota_sidecar.common import records
from quota_sidecar.common.errors import PermanentAdminError, RetryableAdminError
from quota_sidecar.decide.decider import Decider
from quota_sidecar.wiring import assemble

from builders import MemoryStore, sidecar_config

A = "/data/a"
VIOLATING = ({"broker_id": 3, "log_dir": A},)


class MemoryBroker:
    """One broker's cordoned.log.dirs, APPEND/SUBTRACT/SET/DELETE as Kafka applies them; `known=False` is a
    broker older than 4.3; `refuse` makes every write fail as Kafka refuses a path not in log.dirs."""

    def __init__(self, store, known=True, refuse=False):
        self.store, self.known, self.refuse = store, known, refuse
        self.dynamic: str | None = None
        self.calls: list[str] = []
        self.records_at_write: list[dict] = []

    def describe_config_layers(self, broker_id, keys):
        self.calls.append("describe")
        if not self.known:
            return {}
        return {"cordoned.log.dirs": {**({} if self.dynamic is None else {"DYNAMIC_BROKER_CONFIG": self.dynamic}),
                                      "DEFAULT_CONFIG": ""}}

    def incremental_alter_configs(self, resource_type, name, ops):
        (op, value), = ops.values()
        self.calls.append(op)
        self.records_at_write.append(dict(self.store.values))
        if self.refuse:
            raise PermanentAdminError("InvalidRequestError: All entries in cordoned.log.dirs must be present in "
                                      "log.dirs or log.dir")
        entries = [e for e in (self.dynamic or "").split(",") if e]
        if op == "APPEND":
            entries += [v for v in value.split(",") if v not in entries]
        elif op == "SUBTRACT":
            entries = [e for e in entries if e not in value.split(",")]
        self.dynamic = None if op == "DELETE" else ",".join(entries)


def cordoner(**broker) -> tuple[Cordoner, MemoryBroker, MemoryStore]:
    store = MemoryStore()
    admin = MemoryBroker(store, **broker)
    return Cordoner(3, admin, store), admin, store


def passes(car: Cordoner, store: MemoryStore, violations, times: int = 1) -> None:
    for _ in range(times):
        car.apply(violations, records.parse(store.read_all()))


def test_the_record_is_kept_before_the_write_and_the_entry_goes_at_recovery():
    car, broker, store = cordoner()
    passes(car, store, VIOLATING)
    assert broker.dynamic == A and broker.records_at_write[0] == {records.key(records.CORDON, 3, A): {"yielded": False}}
    assert (car.view.in_force, car.view.by_sidecar) == ((A,), (A,))
    passes(car, store, ())
    assert broker.dynamic is None and store.values == {} and car.view.in_force == ()


def test_a_restarted_sidecar_removes_what_its_predecessor_cordoned():
    car, broker, store = cordoner()
    passes(car, store, VIOLATING)
    successor = Cordoner(3, broker, store)
    passes(successor, store, ())
    assert broker.dynamic is None and store.values == {}


def test_on_a_broker_older_than_4_3_it_says_so_once_and_writes_nothing(caplog):
    car, broker, store = cordoner(known=False)
    passes(car, store, VIOLATING, times=3)
    assert caplog.text.count("does not know cordoned.log.dirs") == 1
    assert "APPEND" not in broker.calls and store.values == {} and car.view.unavailable


def test_a_path_the_broker_refuses_is_said_once_and_tried_again_only_after_recovery(caplog):
    car, broker, store = cordoner(refuse=True)
    passes(car, store, VIOLATING, times=3)
    assert broker.calls.count("APPEND") == 1 and caplog.text.count("the broker refused") == 1
    assert store.values == {}, "the record of a refused entry is dropped"
    passes(car, store, ())
    passes(car, store, VIOLATING)
    assert broker.calls.count("APPEND") == 2


def test_clean_up_removes_the_entries_and_the_records():
    car, broker, store = cordoner()
    passes(car, store, VIOLATING)
    car.cleanup(records.parse(store.read_all()))
    assert broker.dynamic is None and store.values == {}


class PollFailsAdmin:
    """Fault injection: the poll fails (no live brokers known); quotas are written as usual; reading or
    writing cordoned.log.dirs fails the test."""

    def live_broker_ids(self):
        raise RetryableAdminError("DescribeCluster failed: timed out (injected)")

    def describe_user_quotas(self, entities=None):
        return {entity: {} for entity in entities or ()}

    def alter_user_quotas(self, changes):
        pass

    def describe_config_layers(self, broker_id, keys):
        raise AssertionError("cordoned.log.dirs was read on a failed poll")

    incremental_alter_configs = describe_config_layers


def test_a_failed_poll_leaves_the_cordons_as_they_are():
    store = MemoryStore()
    store.put(records.key(records.CORDON, 3, A), {"yielded": False})
    config = sidecar_config()
    car = assemble(config, PollFailsAdmin(), store, lambda *_: Decider(config, lambda rows, limit: (1.0, [])),
                   cordoner=Cordoner(3, PollFailsAdmin(), store))

    assert "injected" in car.run_pass().error
    assert records.key(records.CORDON, 3, A) in store.values
