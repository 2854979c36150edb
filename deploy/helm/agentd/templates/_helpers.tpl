{{/* Name of the release's objects, truncated to the 63 characters labels allow. */}}
{{- define "agentd.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "agentd.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels for one role; call with (dict "ctx" $ "role" "gateway"). */}}
{{- define "agentd.selectorLabels" -}}
app.kubernetes.io/name: {{ .ctx.Chart.Name }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .role }}
{{- end -}}

{{- define "agentd.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "agentd.backendsSecret" -}}
{{- if .Values.backends.existingSecret -}}
{{ .Values.backends.existingSecret }}
{{- else -}}
{{ include "agentd.fullname" . }}-backends
{{- end -}}
{{- end -}}

{{- define "agentd.terminationGracePeriodSeconds" -}}
{{ add .Values.drainTimeoutSeconds .Values.terminationGraceMarginSeconds }}
{{- end -}}

{{/* Environment shared by every role. */}}
{{- define "agentd.env" -}}
- name: AGENTD_HTTP_ADDR
  value: {{ printf "0.0.0.0:%v" .Values.ports.http | quote }}
- name: AGENTD_OPS_ADDR
  value: {{ printf "0.0.0.0:%v" .Values.ports.ops | quote }}
- name: AGENTD_GRPC_ADDR
  value: {{ printf "0.0.0.0:%v" .Values.ports.grpc | quote }}
- name: AGENTD_LOG_FORMAT
  value: {{ .Values.logFormat | quote }}
- name: AGENTD_DRAIN_TIMEOUT
  value: {{ printf "%vs" .Values.drainTimeoutSeconds | quote }}
{{- range $key := list "AGENTD_DATABASE_URL" "AGENTD_NATS_URL" "AGENTD_REDIS_URL" "AGENTD_SECRET_KEY" }}
- name: {{ $key }}
  valueFrom:
    secretKeyRef:
      name: {{ include "agentd.backendsSecret" $ }}
      key: {{ $key }}
{{- end }}
- name: AGENTD_OBJECT_STORE_URL
  value: {{ required "set objectStore.url (s3://bucket/prefix): gateways and workers need an object store" .Values.objectStore.url | quote }}
{{- with .Values.objectStore.endpoint }}
- name: AGENTD_OBJECT_STORE_ENDPOINT
  value: {{ . | quote }}
{{- end }}
- name: AWS_REGION
  value: {{ .Values.objectStore.region | quote }}
{{- with .Values.objectStore.existingSecret }}
- name: AWS_ACCESS_KEY_ID
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $.Values.objectStore.accessKeyIdKey }}
- name: AWS_SECRET_ACCESS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $.Values.objectStore.secretAccessKeyKey }}
{{- end }}
{{- if .Values.opsToken.existingSecret }}
- name: AGENTD_OPS_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ .Values.opsToken.existingSecret }}
      key: {{ .Values.opsToken.key }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Container ports and probes for the long-running roles. */}}
{{- define "agentd.ports" -}}
- name: ops
  containerPort: {{ .Values.ports.ops }}
- name: grpc
  containerPort: {{ .Values.ports.grpc }}
{{- end -}}

{{- define "agentd.probes" -}}
readinessProbe:
  httpGet:
    path: /readyz
    port: ops
  periodSeconds: 5
  timeoutSeconds: 2
  failureThreshold: 2
livenessProbe:
  grpc:
    port: {{ .Values.ports.grpc }}
    service: {{ .Values.probes.livenessGrpcService | quote }}
  initialDelaySeconds: 10
  periodSeconds: 10
  timeoutSeconds: 3
  failureThreshold: 6
{{- end -}}
