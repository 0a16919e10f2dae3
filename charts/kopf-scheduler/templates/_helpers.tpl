{{/*
Names and labels. The labels are deploy/'s own (kustomize's commonLabel part-of, the name and
component of the Deployment and the Service); no Helm-specific label is added, so that the default
render equals `kubectl kustomize deploy/`. The selectors use app.kubernetes.io/name only, as
deploy/ does: one release per namespace.
*/}}

{{- define "kopf-scheduler.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "kopf-scheduler.partOf" -}}
app.kubernetes.io/part-of: {{ .Chart.Name }}
{{- end -}}

{{- define "kopf-scheduler.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
{{- end -}}

{{- define "kopf-scheduler.podLabels" -}}
app.kubernetes.io/component: scheduler
{{ include "kopf-scheduler.selectorLabels" . }}
{{- end -}}

{{- define "kopf-scheduler.labels" -}}
{{ include "kopf-scheduler.podLabels" . }}
{{ include "kopf-scheduler.partOf" . }}
{{- end -}}

{{- define "kopf-scheduler.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
