{{/* The database back-end (decision 0071): PostgreSQL from the upstream image, run without the
image's entrypoint. An init container runs `initdb` (once: a cluster already in the data directory is
kept) with the administrator's password that `prepare-toolplane` wrote on the shared volume; the
server runs `postgres` on 127.0.0.1 with no Unix-domain socket. Both are the image's own binaries (on
the image's PATH) with the local stack's arguments (devcluster/backends/database.py: initdb_args,
server_args, INITDB_ONCE), as the image's `postgres` user (initdb needs a user the image's passwd
names), on a read-only root: the data are on a volume of their own, which only these two mount. */}}

{{/* Where the database's own volume is mounted, and its data directory (initdb makes it 0700). */}}
{{- define "oasis-operator.databaseRoot" -}}/var/lib/oasis/database{{- end -}}
{{- define "oasis-operator.databaseData" -}}{{ include "oasis-operator.databaseRoot" . }}/data{{- end -}}

{{/* The tool-plane file's entry (toolPlaneJson): the directory of the administrator's password and
the server's URL as the administrator `oasis`. */}}
{{- define "oasis-operator.database.entry" -}}
{{- $root := include "oasis-operator.toolPlaneRoot" . -}}
{{- dict
  "directory" (printf "%s/database" $root)
  "endpoints" (dict "postgres" (printf "postgresql://oasis@127.0.0.1:%d/postgres" (int .Values.toolPlane.database.port)))
  | toJson -}}
{{- end -}}

{{/* The security context of both containers: the chart's, as the image's user. */}}
{{- define "oasis-operator.database.securityContext" -}}
{{- include "oasis-operator.containerSecurityContext" . }}
runAsUser: {{ .Values.toolPlane.database.runAsUser }}
runAsGroup: {{ .Values.toolPlane.database.runAsGroup }}
{{- end -}}

{{- define "oasis-operator.database.initContainers" -}}
{{- $db := .Values.toolPlane.database -}}
{{- if $db.enabled }}
# A new cluster in the database's volume, unless one is there already (a restart keeps it).
- name: database-init
  image: {{ include "oasis-operator.image" (dict "root" . "image" $db.image) | quote }}
  imagePullPolicy: {{ $db.image.pullPolicy }}
  command: ["sh", "-c", {{ `if [ -s "$2/PG_VERSION" ]; then echo "$2 holds a cluster already"; exit 0; fi; exec initdb "$@"` | quote }}, "initdb"]
  args:
    - -D
    - {{ include "oasis-operator.databaseData" . }}
    - -U
    - oasis
    - --auth=scram-sha-256
    - --pwfile={{ include "oasis-operator.toolPlaneRoot" . }}/database/admin-password
    - -E
    - UTF8
    - --locale=C.UTF-8
    - --no-sync
  securityContext:
    {{- include "oasis-operator.database.securityContext" . | nindent 4 }}
  resources:
    {{- toYaml $db.resources | nindent 4 }}
  volumeMounts:
    - name: toolplane
      mountPath: {{ include "oasis-operator.toolPlaneRoot" . }}
      readOnly: true
    - name: database-data
      mountPath: {{ include "oasis-operator.databaseRoot" . }}
{{- end }}
{{- end -}}

{{- define "oasis-operator.database.containers" -}}
{{- $db := .Values.toolPlane.database -}}
{{- if $db.enabled }}
- name: database
  image: {{ include "oasis-operator.image" (dict "root" . "image" $db.image) | quote }}
  imagePullPolicy: {{ $db.image.pullPolicy }}
  # Not the image's entrypoint: the server itself (it stops on the image's STOPSIGNAL, SIGINT).
  command: ["postgres"]
  args:
    - -D
    - {{ include "oasis-operator.databaseData" . }}
    - -h
    - 127.0.0.1
    - -p
    - {{ $db.port | quote }}
    - -k
    - ""
    {{- range list "fsync=off" "synchronous_commit=off" "full_page_writes=off" "shared_buffers=16MB" "max_connections=100" "max_prepared_transactions=0" "min_wal_size=32MB" "max_wal_size=128MB" }}
    - -c
    - {{ . }}
    {{- end }}
  {{- include "oasis-operator.backendProbe" (dict "probe" $db.livenessProbe "command" (list "pg_isready" "-q" "-h" "127.0.0.1" "-p" (toString $db.port))) | nindent 2 }}
  securityContext:
    {{- include "oasis-operator.database.securityContext" . | nindent 4 }}
  resources:
    {{- toYaml $db.resources | nindent 4 }}
  volumeMounts:
    - name: database-data
      mountPath: {{ include "oasis-operator.databaseRoot" . }}
{{- end }}
{{- end -}}

{{- define "oasis-operator.database.volumes" -}}
{{- $db := .Values.toolPlane.database -}}
{{- if $db.enabled }}
- name: database-data
  emptyDir:
    sizeLimit: {{ $db.volume.sizeLimit }}
{{- end }}
{{- end -}}
