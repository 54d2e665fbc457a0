{{/* The GitOps back-end (decision 0072): this repository's git server, shipped in the operator's
image, as a sidecar of the operator's pod; Flux, installed by the user, fetches from it through the
<fullname>-git Service and applies what it holds. */}}

{{/* Where the git server's files are on the shared volume (adapters/toolplane/gitops.py reads them). */}}
{{- define "oasis-operator.gitopsDirectory" -}}
{{ include "oasis-operator.toolPlaneRoot" . }}/gitops
{{- end -}}

{{/* The git server as Flux's source-controller reaches it: the Service, by its cluster DNS name. */}}
{{- define "oasis-operator.gitopsServiceUrl" -}}
http://{{ include "oasis-operator.fullname" . }}-git.{{ .Release.Namespace }}.svc:{{ .Values.toolPlane.gitops.port }}
{{- end -}}

{{/* The back-end's entry of the tool-plane file (handlers/settings.py ToolPlaneSettings): the operator
pushes and the gateway forwards to localhost; GitRepositories name the Service. */}}
{{- define "oasis-operator.gitopsEntry" -}}
{{- $g := .Values.toolPlane.gitops -}}
{{- dict
  "directory" (include "oasis-operator.gitopsDirectory" .)
  "endpoints" (dict
    "git" (printf "http://127.0.0.1:%d" (int $g.port))
    "flux" (include "oasis-operator.gitopsServiceUrl" .))
  "flux_namespace" $g.flux.namespace | toJson -}}
{{- end -}}

{{/* The git server's container: the operator's image, the local stack's command line
(devcluster/backends/gitops.py git_server_args) on the pod's address. */}}
{{- define "oasis-operator.gitopsContainers" -}}
{{- $g := .Values.toolPlane.gitops -}}
{{- if $g.enabled }}
{{- $dir := include "oasis-operator.gitopsDirectory" . }}
- name: git-server
  image: {{ include "oasis-operator.image" (dict "root" . "image" .Values.image "default" .Chart.AppVersion) | quote }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  command: ["/usr/local/bin/oasis-git-server"]
  args:
    - -listen=0.0.0.0:{{ $g.port }}
    - -root={{ $dir }}/repositories
    - -credentials={{ $dir }}/git-credentials
    - -auto-create
  ports:
    - name: git
      containerPort: {{ $g.port }}
      protocol: TCP
  # Restarts a server that stopped accepting; no readiness probe: the pod's readiness also holds the
  # audit webhook's and the gateway's endpoints, which must not go with the git server.
  livenessProbe:
    tcpSocket:
      port: git
    periodSeconds: 20
    timeoutSeconds: 5
  securityContext:
    {{- include "oasis-operator.containerSecurityContext" . | nindent 4 }}
  resources:
    {{- toYaml $g.resources | nindent 4 }}
  volumeMounts:
    - name: toolplane
      mountPath: {{ include "oasis-operator.toolPlaneRoot" . }}
{{- end }}
{{- end -}}

{{/* The operator's rights over Flux's objects (adapters/toolplane/gitops.py): it applies (server-side)
a GitRepository and a Kustomization per GitOps application, reads them while waiting for the apply
and in the before/after snapshots (a list per namespace), and asks for a reconcile with an annotation
(a merge patch). It never deletes them (they go with the scenario's namespace). */}}
{{- define "oasis-operator.gitopsRbacRules" -}}
{{- if .Values.toolPlane.gitops.enabled }}
# The GitOps back-end (decision 0072): each scenario's Flux source and what applies it.
- apiGroups: ["source.toolkit.fluxcd.io"]
  resources: ["gitrepositories"]
  verbs: ["get", "list", "create", "patch"]
- apiGroups: ["kustomize.toolkit.fluxcd.io"]
  resources: ["kustomizations"]
  verbs: ["get", "list", "create", "patch"]
{{- end }}
{{- end -}}
