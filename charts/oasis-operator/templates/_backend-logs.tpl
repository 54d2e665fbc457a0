{{/*
The logs back-end (decision 0070). A pod's log is read through the API server (`pods/{name}/log`,
audited), which calls the kubelet of the pod's node at the node's InternalIP on the kubelet's port.
With toolPlane.logs.enabled the node simulator (kwok) is that kubelet for every simulated node: it
runs as a container of the operator's pod instead of its own Deployment (node-simulator.yaml), so
that it reads the log files the operator writes on the shared volume (named by ClusterLogs objects),
writes the pod's own address as the nodes' InternalIP, and serves its kubelet API there on port
10250 (HTTPS with kwok's built-in certificate, which an API server without
--kubelet-certificate-authority does not verify). Its options are those of the local stack's
direct route (devcluster/backends/logs.py kubelet_server_args), compared by the chart test.

With toolPlane.resourceUsage.enabled too (decision 0074) the same kubelet serves each simulated node's
resource metrics (/metrics/nodes/<node>/metrics/resource, the path the nodes' annotation gives a
metrics-server): its configuration gains the resource-metrics Metric (files/node-simulator-metrics.yaml)
and it watches ClusterResourceUsage objects, which the operator's usage adapter writes.
*/}}

{{/* The node simulator's container; (dict "root" . "logs" BOOL): its own Deployment's (false) or
the operator pod's sidecar serving the kubelet API (true), with resource metrics when
toolPlane.resourceUsage.enabled. */}}
{{- define "oasis-operator.simulatorContainer" -}}
{{- $root := .root -}}
{{- $v := $root.Values -}}
{{- $usage := and .logs $v.toolPlane.resourceUsage.enabled -}}
- name: node-agent
  image: {{ include "oasis-operator.image" (dict "root" $root "image" $v.kwok.image) | quote }}
  imagePullPolicy: {{ $v.kwok.image.pullPolicy }}
  args:
    - --config=/etc/node-agent/stages.yaml
    - --manage-all-nodes=false
    - --manage-nodes-with-label-selector={{ $v.nodePool.selectorLabel.key }}={{ $v.nodePool.selectorLabel.value }}
    - --cidr={{ $v.kwok.podCIDR }}
    - --node-lease-duration-seconds=40
    {{- if .logs }}
    # The simulated nodes' kubelet: this pod's address, the kubelet's port, logs from ClusterLogs
    # (and each container's usage from ClusterResourceUsage).
    - --node-ip=$(POD_IP)
    - --server-address=[$(POD_IP)]:10250
    - --enable-crds={{ if $usage }}ClusterLogs,ClusterResourceUsage{{ else }}ClusterLogs{{ end }}
    {{- if $usage }}
    # The resource-metrics endpoint metrics-server scrapes (a Metric of kwok's configuration).
    - --config=/etc/node-agent/node-simulator-metrics.yaml
    {{- end }}
    {{- else }}
    - --node-ip=$(POD_IP)
    - --server-address=0.0.0.0:10247
    {{- end }}
  env:
    - name: POD_IP
      valueFrom:
        fieldRef:
          fieldPath: status.podIP
  ports:
    - name: {{ if .logs }}kubelet{{ else }}health{{ end }}
      containerPort: {{ if .logs }}10250{{ else }}10247{{ end }}
      protocol: TCP
  livenessProbe:
    httpGet:
      path: /healthz
      port: {{ if .logs }}kubelet{{ else }}health{{ end }}
    initialDelaySeconds: 10
    periodSeconds: 20
  readinessProbe:
    httpGet:
      path: /healthz
      port: {{ if .logs }}kubelet{{ else }}health{{ end }}
    periodSeconds: 10
  securityContext:
    {{- include "oasis-operator.containerSecurityContext" $root | nindent 4 }}
  resources:
    {{- toYaml $v.kwok.resources | nindent 4 }}
  volumeMounts:
    - name: node-agent-stages
      mountPath: /etc/node-agent
      readOnly: true
    - name: node-agent-tmp
      mountPath: /tmp
    {{- if .logs }}
    # The log files the operator writes, at the paths its ClusterLogs objects name.
    - name: toolplane
      mountPath: {{ include "oasis-operator.toolPlaneRoot" $root }}
      readOnly: true
    {{- end }}
{{- end -}}

{{/* The node simulator's volumes (its stages, its /tmp). */}}
{{- define "oasis-operator.simulatorVolumes" -}}
- name: node-agent-stages
  configMap:
    name: {{ include "oasis-operator.simulatorName" . }}-stages
- name: node-agent-tmp
  emptyDir:
    sizeLimit: 64Mi
{{- end -}}

{{/* The operator pod's containers of the logs back-end (none unless toolPlane.logs.enabled). */}}
{{- define "oasis-operator.logsContainers" -}}
{{- if .Values.toolPlane.logs.enabled }}
{{- if not .Values.kwok.enabled }}
{{- fail "toolPlane.logs.enabled needs kwok.enabled (the node simulator serves the simulated pods' logs)" }}
{{- end }}
{{- include "oasis-operator.simulatorContainer" (dict "root" . "logs" true) | nindent 8 }}
{{- end }}
{{- if and .Values.toolPlane.resourceUsage.enabled (not .Values.toolPlane.logs.enabled) }}
{{- fail "toolPlane.resourceUsage.enabled needs toolPlane.logs.enabled (the node simulator in the operator's pod is the kubelet metrics-server scrapes)" }}
{{- end }}
{{- end -}}

{{/* The operator pod's volumes of the logs back-end. */}}
{{- define "oasis-operator.logsVolumes" -}}
{{- if .Values.toolPlane.logs.enabled }}
{{- include "oasis-operator.simulatorVolumes" . | nindent 8 }}
{{- end }}
{{- end -}}

{{/* The operator pod's annotations of the logs back-end: changed stages restart the simulator. */}}
{{- define "oasis-operator.logsAnnotations" -}}
{{- if .Values.toolPlane.logs.enabled }}
checksum/stages: {{ .Files.Get "files/node-simulator-stages.yaml" | sha256sum }}
{{- if .Values.toolPlane.resourceUsage.enabled }}
checksum/simulator-metrics: {{ .Files.Get "files/node-simulator-metrics.yaml" | sha256sum }}
{{- end }}
{{- end }}
{{- end -}}
