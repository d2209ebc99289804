{{/* Names. */}}
{{- define "quota-sidecar.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "quota-sidecar.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The broker pods the sidecar lives in: the example's, or those of brokerPodSelector. */}}
{{- define "quota-sidecar.brokerSelector" -}}
{{- if .Values.example.enabled -}}
matchLabels:
  app.kubernetes.io/name: {{ .Chart.Name }}-kafka
  app.kubernetes.io/instance: {{ .Release.Name }}
{{- else -}}
{{ toYaml .Values.brokerPodSelector }}
{{- end -}}
{{- end -}}

{{- define "quota-sidecar.hasSecret" -}}
{{- if or .Values.secrets .Values.existingSecret }}true{{ end -}}
{{- end -}}

{{- define "quota-sidecar.secretName" -}}
{{- .Values.existingSecret | default (printf "%s-secret" (include "quota-sidecar.fullname" .)) -}}
{{- end -}}

{{- define "quota-sidecar.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "quota-sidecar.httpPort" -}}
{{- index .Values.config "http.port" | default "8080" -}}
{{- end -}}

{{/* The port of the probes and /metrics: the plain listener when the endpoint speaks https. */}}
{{- define "quota-sidecar.metricsPortName" -}}
{{- if .Values.httpTls.secretName }}sidecar-plain{{ else }}sidecar-http{{ end -}}
{{- end -}}

{{- define "quota-sidecar.metricsPort" -}}
{{- if .Values.httpTls.secretName }}{{ .Values.httpTls.plainPort }}{{ else }}{{ include "quota-sidecar.httpPort" . }}{{ end -}}
{{- end -}}

{{- define "quota-sidecar.kafkaTlsDir" -}}/etc/quota-sidecar-kafka-tls{{- end -}}
{{- define "quota-sidecar.httpTlsDir" -}}/etc/quota-sidecar-http-tls{{- end -}}

{{/*
The properties of a process of the chart, from config: the agent's (with the log dirs of the data volume and the
endpoint's TLS files) or, given (dict "root" . "aggregator" true), the aggregator's (the pipeline as it reaches
it, its checkpoint on its volume). Both get the TLS files to the brokers.
*/}}
{{- define "quota-sidecar.properties" -}}
{{- $root := .root | default . -}}
{{- $aggregator := .aggregator | default false -}}
{{- $props := deepCopy $root.Values.config -}}
{{- with $root.Values.kafkaTls -}}
{{- if .secretName -}}
{{- $dir := include "quota-sidecar.kafkaTlsDir" $root -}}
{{- $_ := set $props "kafka.admin.ssl.cafile" (printf "%s/%s" $dir .caKey) -}}
{{- if .certificateKey -}}
{{- $_ := set $props "kafka.admin.ssl.certfile" (printf "%s/%s" $dir .certificateKey) -}}
{{- $_ := set $props "kafka.admin.ssl.keyfile" (printf "%s/%s" $dir .privateKeyKey) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if $aggregator -}}
{{- if not (index $props "pipeline.bootstrap.servers") -}}
{{- $_ := set $props "pipeline.bootstrap.servers" (include "quota-sidecar.aggregatorBootstrap" $root) -}}
{{- end -}}
{{- if and $root.Values.aggregator.sparkUrl (not (index $props "spark.url")) -}}
{{- $_ := set $props "spark.url" $root.Values.aggregator.sparkUrl -}}
{{- end -}}
{{- if and $root.Values.aggregator.driverMemory (not (index $props "aggregator.driver.memory")) -}}
{{- $_ := set $props "aggregator.driver.memory" $root.Values.aggregator.driverMemory -}}
{{- end -}}
{{- $_ := set $props "aggregator.checkpoint.location" (printf "%s/checkpoint" (include "quota-sidecar.aggregatorDataDir" $root)) -}}
{{- if $root.Values.aggregator.history.enabled -}}
{{- if not (index $props "history.location") -}}
{{- $_ := set $props "history.location" (printf "%s/history" (include "quota-sidecar.aggregatorDataDir" $root)) -}}
{{- end -}}
{{- $_ := set $props "aggregator.metrics.port" (toString $root.Values.aggregator.metricsPort) -}}
{{- end -}}
{{- else -}}
{{- if and $root.Values.dataVolume.logDirs (not (hasKey $props "storage.local.log.dirs")) -}}
{{- $_ := set $props "storage.local.log.dirs" $root.Values.dataVolume.logDirs -}}
{{- end -}}
{{- if $root.Values.httpTls.secretName -}}
{{- $dir := include "quota-sidecar.httpTlsDir" $root -}}
{{- $_ := set $props "http.tls.cert.file" (printf "%s/tls.crt" $dir) -}}
{{- $_ := set $props "http.tls.key.file" (printf "%s/tls.key" $dir) -}}
{{- $_ := set $props "http.plain.port" (toString $root.Values.httpTls.plainPort) -}}
{{- end -}}
{{- end -}}
# Rendered by the quota-sidecar chart from .Values.config (and {{ if $aggregator }}aggregator, kafkaTls{{ else }}dataVolume, kafkaTls, httpTls{{ end }}).
{{- range $key, $value := $props }}
client.quota.callback.static.{{ $key }}={{ $value }}
{{- end }}
{{- end -}}

{{/*
How the aggregator reaches the pipeline on the watched cluster: aggregator.bootstrapServers; else the example's
Service; else Bitnami's Service of a release named kafka (brokerPodSelector's default is Bitnami's too).
*/}}
{{- define "quota-sidecar.aggregatorBootstrap" -}}
{{- if .Values.aggregator.bootstrapServers -}}
{{ .Values.aggregator.bootstrapServers }}
{{- else if .Values.example.enabled -}}
{{ include "quota-sidecar.fullname" . }}-kafka:9092
{{- else -}}
kafka:9092
{{- end -}}
{{- end -}}

{{- define "quota-sidecar.aggregatorDataDir" -}}/var/lib/quota-sidecar-aggregator{{- end -}}

{{- define "quota-sidecar.secretProperties" -}}
{{- range $key, $value := .Values.secrets }}
client.quota.callback.static.{{ $key }}={{ $value }}
{{- end }}
{{- end -}}

{{/* /readyz, or with probes.readinessStrict /readyz?strict=1 and its max_age (values.yaml says why not). */}}
{{- define "quota-sidecar.readinessPath" -}}
{{- with .Values.probes -}}
{{- if .readinessStrict -}}
/readyz?strict=1{{ with .readinessMaxAge }}&max_age={{ . }}{{ end }}
{{- else if .readinessMaxAge -}}
{{- fail "probes.readinessMaxAge is the strict readiness's: set probes.readinessStrict=true with it, or leave it empty" -}}
{{- else -}}
/readyz
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The sidecar container, for a broker pod's `containers` (Bitnami: broker.sidecars) or, with
`restartPolicy: Always` added, its `initContainers` (a native sidecar). Its volumes: "quota-sidecar.volumes".
*/}}
{{- define "quota-sidecar.container" -}}
name: quota-sidecar
image: {{ include "quota-sidecar.image" . | quote }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
command: ["quota-sidecar"]
args:
  - run
  {{- with .Values.brokerProperties }}
  - --config
  - {{ . | quote }}
  {{- end }}
  - --config
  - /etc/quota-sidecar/sidecar.properties
  {{- if include "quota-sidecar.hasSecret" . }}
  - --config
  - /etc/quota-sidecar-secret/secret.properties
  {{- end }}
  {{- if eq .Values.brokerId "podIndex" }}
  - --set
  - broker.id=$(POD_INDEX)
  {{- end }}
env:
  {{- if eq .Values.brokerId "podIndex" }}
  - name: POD_INDEX
    valueFrom:
      fieldRef:
        fieldPath: metadata.labels['apps.kubernetes.io/pod-index']
  {{- end }}
  # Everything the agent writes goes to /tmp (an emptyDir): the root filesystem is read-only.
  - name: HOME
    value: /tmp
ports:
  - name: sidecar-http
    containerPort: {{ include "quota-sidecar.httpPort" . }}
    protocol: TCP
  {{- if .Values.httpTls.secretName }}
  - name: sidecar-plain
    containerPort: {{ .Values.httpTls.plainPort }}
    protocol: TCP
  {{- end }}
# Ready once the endpoint serves and the local watch runs: a native sidecar lets the broker start then, without
# waiting for the aggregator's first decision.
startupProbe:
  httpGet: {path: /readyz, port: {{ include "quota-sidecar.metricsPortName" . }}}
  periodSeconds: 5
  failureThreshold: 60
{{- if .Values.probes.liveness }}
livenessProbe:
  httpGet: {path: /healthz, port: {{ include "quota-sidecar.metricsPortName" . }}}
  periodSeconds: 20
  timeoutSeconds: 5
  failureThreshold: 3
{{- end }}
{{- if .Values.probes.readiness }}
readinessProbe:
  httpGet:
    path: {{ include "quota-sidecar.readinessPath" . }}
    port: {{ include "quota-sidecar.metricsPortName" . }}
  periodSeconds: 15
  timeoutSeconds: 5
{{- end }}
resources:
  {{- toYaml .Values.resources | nindent 2 }}
securityContext:
  runAsNonRoot: true
  runAsUser: 10001
  runAsGroup: 10001
  readOnlyRootFilesystem: true
  allowPrivilegeEscalation: false
  capabilities: {drop: [ALL]}
  seccompProfile: {type: RuntimeDefault}
volumeMounts:
  - name: quota-sidecar-config
    mountPath: /etc/quota-sidecar
    readOnly: true
  {{- if include "quota-sidecar.hasSecret" . }}
  - name: quota-sidecar-secret
    mountPath: /etc/quota-sidecar-secret
    readOnly: true
  {{- end }}
  {{- if .Values.kafkaTls.secretName }}
  - name: quota-sidecar-kafka-tls
    mountPath: {{ include "quota-sidecar.kafkaTlsDir" . }}
    readOnly: true
  {{- end }}
  {{- if .Values.httpTls.secretName }}
  - name: quota-sidecar-http-tls
    mountPath: {{ include "quota-sidecar.httpTlsDir" . }}
    readOnly: true
  {{- end }}
  - name: {{ .Values.dataVolume.name }}
    mountPath: {{ .Values.dataVolume.mountPath }}
    readOnly: true
  - name: quota-sidecar-tmp
    mountPath: /tmp
  {{- with .Values.extraVolumeMounts }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end -}}

{{/* The volumes the sidecar container needs besides the broker's data volume. */}}
{{- define "quota-sidecar.volumes" -}}
- name: quota-sidecar-config
  configMap:
    name: {{ include "quota-sidecar.fullname" . }}-config
{{- if include "quota-sidecar.hasSecret" . }}
- name: quota-sidecar-secret
  secret:
    secretName: {{ include "quota-sidecar.secretName" . }}
{{- end }}
{{- with .Values.kafkaTls.secretName }}
- name: quota-sidecar-kafka-tls
  secret:
    secretName: {{ . }}
{{- end }}
{{- with .Values.httpTls.secretName }}
- name: quota-sidecar-http-tls
  secret:
    secretName: {{ . }}
{{- end }}
- name: quota-sidecar-tmp
  emptyDir: {}
{{- end -}}

{{/*
Where the aggregator's Spark runs, from aggregator.sparkUrl: embedded, connect, standalone or kubernetes; anything
else fails in one line.
*/}}
{{- define "quota-sidecar.sparkMode" -}}
{{- $url := .Values.aggregator.sparkUrl | default "" -}}
{{- if not $url -}}embedded
{{- else if hasPrefix "sc://" $url -}}connect
{{- else if hasPrefix "spark://" $url -}}standalone
{{- else if hasPrefix "k8s://" $url -}}kubernetes
{{- else -}}
{{- fail (printf "aggregator.sparkUrl %q: expected spark://host:port, k8s://https://host:port or sc://host:port (empty: Spark in the aggregator's pod)" $url) -}}
{{- end -}}
{{- end -}}

{{/* Its executors connect back to its driver (spark:// and k8s://): a headless Service and fixed ports. */}}
{{- define "quota-sidecar.sparkDriverReached" -}}
{{- if has (include "quota-sidecar.sparkMode" .) (list "standalone" "kubernetes") }}true{{ end -}}
{{- end -}}

{{- define "quota-sidecar.sparkConfDir" -}}/etc/quota-sidecar-spark{{- end -}}

{{/* The driver's spark-defaults.conf for a Spark cluster: how executors reach it back, what they may take. */}}
{{- define "quota-sidecar.sparkDefaults" -}}
{{- $name := printf "%s-aggregator" (include "quota-sidecar.fullname" .) -}}
{{- $aggregator := .Values.aggregator -}}
{{- $executors := $aggregator.executors -}}
{{- $conf := dict
      "spark.driver.host" (printf "%s-driver.%s.svc" $name .Release.Namespace)
      "spark.driver.bindAddress" "0.0.0.0"
      "spark.driver.port" (toString $aggregator.driverPorts.driver)
      "spark.blockManager.port" (toString $aggregator.driverPorts.blockManager)
      "spark.executor.cores" (toString $executors.cores)
      "spark.executor.memory" $executors.memory
      "spark.executor.memoryOverhead" $executors.memoryOverhead -}}
{{- if eq (include "quota-sidecar.sparkMode" .) "standalone" -}}
{{- $_ := set $conf "spark.cores.max" (toString (mul $executors.instances $executors.cores)) -}}
{{- else -}}
{{- $_ := set $conf "spark.executor.instances" (toString $executors.instances) -}}
{{- $_ := set $conf "spark.kubernetes.namespace" .Release.Namespace -}}
{{- $_ := set $conf "spark.kubernetes.container.image" (printf "%s:%s" $aggregator.image.repository ($aggregator.image.tag | default .Chart.AppVersion)) -}}
{{- $_ := set $conf "spark.kubernetes.container.image.pullPolicy" .Values.image.pullPolicy -}}
{{- $_ := set $conf "spark.kubernetes.executor.podNamePrefix" $name -}}
{{- $_ := set $conf "spark.kubernetes.executor.podTemplateFile" (printf "%s/executor-pod.yaml" (include "quota-sidecar.sparkConfDir" .)) -}}
{{- $_ := set $conf "spark.kubernetes.executor.podTemplateContainerName" "executor" -}}
{{- $_ := set $conf "spark.kubernetes.executor.request.cores" (toString $executors.cpuRequest) -}}
{{- /* its executors take their settings from the driver and have no volume claims: no ConfigMap, no claims */ -}}
{{- $_ := set $conf "spark.kubernetes.executor.disableConfigMap" "true" -}}
{{- $_ := set $conf "spark.kubernetes.driver.ownPersistentVolumeClaim" "false" -}}
{{- $_ := set $conf "spark.kubernetes.driver.reusePersistentVolumeClaim" "false" -}}
{{- end -}}
# Rendered by the quota-sidecar chart from aggregator.sparkUrl, driverPorts, executors and sparkConf.
{{- range $key, $value := merge (deepCopy $aggregator.sparkConf) $conf }}
{{ $key }} {{ $value }}
{{- end }}
{{- end -}}
