{{/*
The self-signed CA and serving pair, as YAML (caCert, cert, key, caKey: PEM).

First install: generate them. Every later render: read the Secret back with `lookup` and reuse
it, so `helm upgrade` never swaps the CA under running pods (the classic genCA-per-render
outage). With certs.selfSigned.reissueServingCert the CA is kept and only the serving pair is
re-signed. `lookup` is empty under a client-side `helm template`. Call it once per render
(templates/admission.yaml does) and hand the result on: Helm does not share state between files.
*/}}
{{- define "gpupolicy.selfSignedCerts" -}}
{{- $host := include "gpupolicy.serviceHost" . -}}
{{- $svc := include "gpupolicy.fullname" . -}}
{{- $names := list $host (printf "%s.cluster.local" $host) (printf "%s.%s" $svc .Release.Namespace) $svc -}}
{{- $days := int .Values.certs.selfSigned.certValidityDays -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "gpupolicy.tlsSecretName" .) -}}
{{- $data := dict -}}
{{- if $existing -}}{{- $data = default (dict) $existing.data -}}{{- end -}}
{{- $out := dict -}}
{{- if and (index $data "ca.crt") (index $data "ca.key") (index $data "tls.crt") (index $data "tls.key") -}}
{{- $_ := set $out "caCert" (index $data "ca.crt" | b64dec) -}}
{{- $_ := set $out "caKey" (index $data "ca.key" | b64dec) -}}
{{- if .Values.certs.selfSigned.reissueServingCert -}}
{{- $ca := buildCustomCert (index $data "ca.crt") (index $data "ca.key") -}}
{{- $cert := genSignedCert $host nil $names $days $ca -}}
{{- $_ := set $out "cert" $cert.Cert -}}
{{- $_ := set $out "key" $cert.Key -}}
{{- else -}}
{{- $_ := set $out "cert" (index $data "tls.crt" | b64dec) -}}
{{- $_ := set $out "key" (index $data "tls.key" | b64dec) -}}
{{- end -}}
{{- else -}}
{{- $ca := genCA (printf "%s-ca" $svc) (int .Values.certs.selfSigned.caValidityDays) -}}
{{- $cert := genSignedCert $host nil $names $days $ca -}}
{{- $_ := set $out "caCert" $ca.Cert -}}
{{- $_ := set $out "caKey" $ca.Key -}}
{{- $_ := set $out "cert" $cert.Cert -}}
{{- $_ := set $out "key" $cert.Key -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* caBundle for the webhook clientConfig (selfSigned and secret modes); args root, certs. */}}
{{- define "gpupolicy.caBundle" -}}
{{- $values := .root.Values -}}
{{- if eq $values.certs.mode "selfSigned" -}}
{{- .certs.caCert | b64enc -}}
{{- else if eq $values.certs.mode "secret" -}}
{{- required "certs.caBundle is required with certs.mode=secret (base64 PEM of the CA that signed your Secret)" $values.certs.caBundle -}}
{{- end -}}
{{- end -}}

{{/* Annotations for the webhook configurations (cert-manager's cainjector fills caBundle). */}}
{{- define "gpupolicy.webhookAnnotations" -}}
{{- if eq .Values.certs.mode "certManager" -}}
cert-manager.io/inject-ca-from: {{ printf "%s/%s" .Release.Namespace (include "gpupolicy.fullname" .) }}
{{- end -}}
{{- end -}}

{{/* clientConfig for a webhook at `.path`; args root, certs, path. */}}
{{- define "gpupolicy.clientConfig" -}}
clientConfig:
  service:
    name: {{ include "gpupolicy.fullname" .root }}
    namespace: {{ .root.Release.Namespace }}
    path: {{ .path }}
    port: {{ .root.Values.service.port }}
  {{- with include "gpupolicy.caBundle" . }}
  caBundle: {{ . }}
  {{- end }}
{{- end -}}
