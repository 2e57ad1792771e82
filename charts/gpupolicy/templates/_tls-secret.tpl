{{/* The self-signed serving Secret and the CA's own Secret; args as gpupolicy.deployment. */}}
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
  annotations:
    # When tls.crt expires: Helm cannot read a certificate, a later upgrade reads this to
    # decide whether to renew it (certs.selfSigned.renewBeforeDays).
    {{ include "gpupolicy.notAfterAnnotation" . }}: {{ $.certs.notAfter | quote }}
type: kubernetes.io/tls
data:
  tls.crt: {{ $.certs.cert | b64enc }}
  tls.key: {{ $.certs.key | b64enc }}
  ca.crt: {{ $.certs.caCert | b64enc }}
---
# The CA's key, apart from what the pods mount: only `helm upgrade` reads it (lookup), to sign
# the next serving certificate with the same CA, so caBundle never changes.
apiVersion: v1
kind: Secret
metadata:
  name: {{ include "gpupolicy.caSecretName" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "gpupolicy.labels" . | nindent 4 }}
type: Opaque
data:
  ca.crt: {{ $.certs.caCert | b64enc }}
  ca.key: {{ $.certs.caKey | b64enc }}
{{- end }}
{{- end }}
{{- end -}}
