{{/* Names and labels shared by the templates. */}}

{{- define "oasis-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Every object's name derives from this: the release's name (or fullnameOverride), never a fixed one. */}}
{{- define "oasis-operator.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* An image reference: (dict "root" . "image" IMAGE ["default" TAG]). IMAGE has repository, tag and an
optional digest (which wins over the tag). With global.imageRegistry set, the repository's own registry
host (a first path part with a dot or a colon, or localhost) is replaced by it, and a repository without
one (Docker Hub) is put under it: one value moves every image of the chart to a mirror. */}}
{{- define "oasis-operator.image" -}}
{{- $repo := .image.repository -}}
{{- $registry := (.root.Values.global | default dict).imageRegistry -}}
{{- if $registry -}}
{{- $parts := splitList "/" $repo -}}
{{- if and (gt (len $parts) 1) (regexMatch "[.:]|^localhost$" (first $parts)) -}}
{{- $repo = join "/" (rest $parts) -}}
{{- end -}}
{{- $repo = printf "%s/%s" (trimSuffix "/" $registry) $repo -}}
{{- end -}}
{{- if .image.digest -}}
{{- printf "%s@%s" $repo .image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (toString (.image.tag | default .default)) -}}
{{- end -}}
{{- end -}}

{{/* Pod-level settings every pod of the chart takes from the values: pull secrets and priority class. */}}
{{- define "oasis-operator.podScheduling" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . | quote }}
{{- end }}
{{- end -}}

{{- define "oasis-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "oasis-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "oasis-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "oasis-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{- define "oasis-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "oasis-operator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "oasis-operator.auditTlsSecret" -}}
{{- default (printf "%s-audit-tls" (include "oasis-operator.fullname" .)) .Values.auditWebhook.tls.secretName -}}
{{- end -}}

{{/* The simulator's names avoid the words a scenario's agent could take as a hint. */}}
{{- define "oasis-operator.simulatorName" -}}
{{- printf "%s-node-agent" (include "oasis-operator.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "oasis-operator.simulatorSelectorLabels" -}}
app.kubernetes.io/name: {{ include "oasis-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: node-agent
{{- end -}}

{{/* Real pods (operator, node simulator) must never be scheduled onto the simulated pool, where
nothing would run them: keep them off nodes carrying the pool's label unless .Values.affinity says
otherwise. */}}
{{- define "oasis-operator.affinity" -}}
{{- if .Values.affinity -}}
{{- toYaml .Values.affinity -}}
{{- else -}}
nodeAffinity:
  requiredDuringSchedulingIgnoredDuringExecution:
    nodeSelectorTerms:
      - matchExpressions:
          - key: {{ .Values.nodePool.selectorLabel.key }}
            operator: DoesNotExist
{{- end -}}
{{- end -}}

{{/* A Prometheus duration (30m, 2h, 1d) in seconds, for comparisons with timestamps. */}}
{{- define "oasis-operator.seconds" -}}
{{- $d := . -}}
{{- $n := int (regexReplaceAll "[^0-9]" $d "") -}}
{{- $unit := regexReplaceAll "[0-9]" $d "" -}}
{{- $factor := dict "ms" 0 "s" 1 "m" 60 "h" 3600 "d" 86400 "w" 604800 "y" 31536000 -}}
{{- mul $n (get $factor $unit) -}}
{{- end -}}

{{/* The URL agents are told for the recording tool gateway: the value, else its Service's address. */}}
{{- define "oasis-operator.toolGatewayUrl" -}}
{{- if .Values.toolGateway.url -}}
{{- .Values.toolGateway.url -}}
{{- else -}}
http://{{ include "oasis-operator.fullname" . }}-tool-gateway.{{ .Release.Namespace }}.svc:{{ .Values.toolGateway.service.port }}
{{- end -}}
{{- end }}

{{/* Tool-plane back-ends (decision 0061): "true" when any is enabled. */}}
{{- define "oasis-operator.toolPlaneOn" -}}
{{- $tp := .Values.toolPlane -}}
{{- if or $tp.metrics.enabled $tp.alerts.enabled $tp.traces.enabled $tp.logs.enabled $tp.database.enabled $tp.gitops.enabled -}}true{{- end -}}
{{- end -}}

{{/* The gateway is served when asked for, and always with a back-end: agents reach back-ends only
through it. */}}
{{- define "oasis-operator.toolGatewayOn" -}}
{{- if or .Values.toolGateway.enabled (include "oasis-operator.toolPlaneOn" .) -}}true{{- end -}}
{{- end -}}

{{/* Where the back-ends' shared volume is mounted (in every container that uses it), and the
operator's tool-plane file. */}}
{{- define "oasis-operator.toolPlaneRoot" -}}/var/lib/oasis/toolplane{{- end -}}
{{- define "oasis-operator.toolPlaneFile" -}}/etc/oasis/toolplane/toolplane.json{{- end -}}

{{/* The operator's tool-plane file (handlers/settings.py ToolPlaneSettings): per enabled back-end its
directory on the shared volume and its endpoints on localhost. Ports must differ from each other and
from the operator's own. */}}
{{- define "oasis-operator.toolPlaneJson" -}}
{{- $root := include "oasis-operator.toolPlaneRoot" . -}}
{{- $tp := .Values.toolPlane -}}
{{- $ports := dict -}}
{{- $taken := list (int .Values.metrics.port) (int .Values.health.port) (int .Values.toolGateway.port) -}}
{{- if .Values.auditWebhook.enabled }}{{ $taken = append $taken (int .Values.auditWebhook.port) }}{{ end -}}
{{- $backends := dict -}}
{{- if $tp.metrics.enabled -}}
{{- $_ := set $ports "toolPlane.metrics.store.port" (int $tp.metrics.store.port) -}}
{{- $_ := set $ports "toolPlane.metrics.vmauth.port" (int $tp.metrics.vmauth.port) -}}
{{- $_ := set $backends "metrics" (dict
  "directory" (printf "%s/metrics" $root)
  "endpoints" (dict
    "store" (printf "http://127.0.0.1:%d" (int $tp.metrics.store.port))
    "prometheus" (printf "http://127.0.0.1:%d" (int $tp.metrics.vmauth.port)))) -}}
{{- end -}}
{{- if $tp.alerts.enabled -}}
{{- if not $tp.metrics.enabled -}}
{{- fail "toolPlane.alerts.enabled needs toolPlane.metrics.enabled (vmalert evaluates over the metrics store)" -}}
{{- end -}}
{{- $_ := set $ports "toolPlane.alerts.vmalert.port" (int $tp.alerts.vmalert.port) -}}
{{- $_ := set $ports "toolPlane.alerts.labelProxy.port" (int $tp.alerts.labelProxy.port) -}}
{{- $_ := set $backends "alerts" (dict
  "directory" (printf "%s/alerts" $root)
  "endpoints" (dict
    "vmalert" (printf "http://127.0.0.1:%d" (int $tp.alerts.vmalert.port))
    "alerts-proxy" (printf "http://127.0.0.1:%d" (int $tp.alerts.labelProxy.port)))) -}}
{{- end -}}
{{- if $tp.traces.enabled -}}
{{- $_ := set $backends "traces" (dict "directory" (printf "%s/traces" $root) "endpoints" (dict)) -}}
{{- end -}}
{{- if $tp.logs.enabled -}}
{{- $_ := set $ports "toolPlane.logs (the simulated kubelets' port)" 10250 -}}
{{- $_ := set $backends "logs" (dict "directory" (printf "%s/logs" $root) "endpoints" (dict)) -}}
{{- end -}}
{{- if $tp.resourceUsage.enabled -}}
{{- $_ := set $backends "resource-metrics" (dict "directory" (printf "%s/resource-metrics" $root) "endpoints" (dict)) -}}
{{- end -}}
{{- if $tp.database.enabled -}}
{{- $_ := set $ports "toolPlane.database.port" (int $tp.database.port) -}}
{{- $_ := set $backends "database" (include "oasis-operator.database.entry" . | fromJson) -}}
{{- end -}}
{{- if $tp.gitops.enabled -}}
{{- $_ := set $ports "toolPlane.gitops.port" (int $tp.gitops.port) -}}
{{- $_ := set $backends "gitops" (include "oasis-operator.gitopsEntry" . | fromJson) -}}
{{- end -}}
{{- range $name, $port := $ports -}}
{{- if has $port $taken -}}
{{- fail (printf "%s: port %d is already used in the operator's pod (every container of it shares the pod's addresses)" $name $port) -}}
{{- end -}}
{{- $taken = append $taken $port -}}
{{- end -}}
{{- dict "backends" $backends | toPrettyJson -}}
{{- end -}}

{{/* The security context of every container of the chart's pods. */}}
{{- define "oasis-operator.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* A tool-plane back-end's liveness probe: (dict "probe" VALUE "command" LIST). The back-ends listen on
127.0.0.1 only (decision 0061), where the kubelet's HTTP and TCP probes cannot reach, so the probe runs
in the container. No readiness probe: the pod's readiness holds the operator's audit webhook and tool
gateway, which must not go when a back-end does; a wedged back-end is restarted instead. A non-empty
VALUE (the back-end's livenessProbe) replaces the default. */}}
{{- define "oasis-operator.backendProbe" -}}
livenessProbe:
{{- if .probe }}
  {{- toYaml .probe | nindent 2 }}
{{- else }}
  exec:
    command: {{ .command | toJson }}
  initialDelaySeconds: 10
  periodSeconds: 20
  timeoutSeconds: 5
  failureThreshold: 3
{{- end }}
{{- end -}}
