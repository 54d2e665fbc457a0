{{/* Names and labels shared by the templates. */}}

{{- define "oasis-operator.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "oasis-operator.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
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
