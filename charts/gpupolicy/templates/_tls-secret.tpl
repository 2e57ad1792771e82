{{/* The self-signed serving Secret; args as gpupolicy.deployment. */}}
{{- define "gpupolicy.tlsSecret" -}}
{{- with .root }}
{{- if eq .Values.certs.mode "selfSigned" }}
apiVersion: v1
kind: Secret
metadata:
  name: {{ include "gpupolicy.tlsSecretName" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "gpupolicy.labels" . | nindent 4 }}
type: kubernetes.io/tls
data:
  tls.crt: {{ $.certs.cert | b64enc }}
  tls.key: {{ $.certs.key | b64enc }}
  ca.crt: {{ $.certs.caCert | b64enc }}
  # Kept so later upgrades can re-sign the serving pair with the same CA.
  ca.key: {{ $.certs.caKey | b64enc }}
{{- end }}
{{- end }}
{{- end -}}
