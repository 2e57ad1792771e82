{{/* Names and labels. */}}
{{- define "gpupolicy.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gpupolicy.fullname" -}}
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

{{- define "gpupolicy.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpupolicy.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "gpupolicy.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "gpupolicy.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gpupolicy
{{- end -}}

{{- define "gpupolicy.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "gpupolicy.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "gpupolicy.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The DNS name the API server calls; the serving certificate must carry it as a SAN. */}}
{{- define "gpupolicy.serviceHost" -}}
{{- printf "%s.%s.svc" (include "gpupolicy.fullname" .) .Release.Namespace -}}
{{- end -}}

{{- define "gpupolicy.tlsSecretName" -}}
{{- default (printf "%s-tls" (include "gpupolicy.fullname" .)) .Values.certs.secretName -}}
{{- end -}}

{{/* Namespaces never sent to the webhooks: a webhook outage must not stop the control plane,
node heartbeats, or the webhook's own pods from coming back. */}}
{{- define "gpupolicy.namespaceSelector" -}}
matchExpressions:
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values:
      {{- range uniq (concat (list "kube-system" "kube-node-lease" .Release.Namespace) .Values.webhooks.excludeNamespaces) }}
      - {{ . | quote }}
      {{- end }}
{{- with .Values.webhooks.namespaceSelectorExpressions }}
{{ toYaml . | indent 2 }}
{{- end }}
{{- end -}}

{{/* Whether to render matchConditions: asked for, and the cluster knows them (1.28+). */}}
{{- define "gpupolicy.matchConditionsOn" -}}
{{- if and .Values.webhooks.matchConditions (semverCompare ">=1.28.0-0" .Capabilities.KubeVersion.Version) -}}
true
{{- end -}}
{{- end -}}
