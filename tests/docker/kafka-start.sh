#!/bin/sh
# The broker of compose.yaml: KRaft, one node as broker and controller, on the ports of the environment.
set -eu
cat > /tmp/server.properties <<END
node.id=1
process.roles=broker,controller
controller.quorum.voters=1@127.0.0.1:$CONTROLLER_PORT
controller.listener.names=CONTROLLER
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT
log.dirs=/var/lib/kafka/data
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
log.segment.delete.delay.ms=500
group.initial.rebalance.delay.ms=0
END
java -cp '/opt/kafka/libs/*' -Djava.io.tmpdir=/tmp kafka.tools.StorageTool format --cluster-id "$CLUSTER_ID" --config /tmp/server.properties
exec java -Xmx512m -XX:-UsePerfData -Djava.io.tmpdir=/tmp -cp '/opt/kafka/libs/*' kafka.Kafka /tmp/server.properties
