{{/*
The self-signed CA and serving pair, as YAML (caCert, caKey, cert, key: PEM; notAfter: when
the serving certificate expires, RFC 3339; issued: true when made by this render).

The CA's key lives in a Secret of its own (<fullname>-ca) that no pod mounts; the serving
Secret holds the serving pair and the CA's certificate only. Every render after the first reads
both back with `lookup`, so `helm upgrade` never swaps the CA under running pods (the classic
genCA-per-render outage), and the serving certificate, short-lived, is issued anew from the
same CA when it is within certs.selfSigned.renewBeforeDays of its end (Helm cannot parse a
certificate: its end is kept in the serving Secret's annotation), on certs.selfSigned.
reissueServingCert, or when it was not issued by this chart version (no such annotation: a
10-year pair of an earlier version, whose CA, kept in the serving Secret then, is taken over).
`lookup` is empty under a client-side `helm template`. Call it once per render
(templates/admission.yaml does) and hand the result on: Helm does not share state between files.
*/}}
{{- define "gpupolicy.notAfterAnnotation" -}}gpupolicy.io/not-after{{- end -}}
{{- define "gpupolicy.caSecretName" -}}{{ printf "%s-ca" (include "gpupolicy.fullname" .) }}{{- end -}}
{{- define "gpupolicy.selfSignedCerts" -}}
{{- $host := include "gpupolicy.serviceHost" . -}}
{{- $svc := include "gpupolicy.fullname" . -}}
{{- $names := list $host (printf "%s.cluster.local" $host) (printf "%s.%s" $svc .Release.Namespace) $svc -}}
{{- $cfg := .Values.certs.selfSigned -}}
{{- $days := int $cfg.certValidityDays -}}
{{- $serving := lookup "v1" "Secret" .Release.Namespace (include "gpupolicy.tlsSecretName" .) | default (dict) -}}
{{- $caSecret := lookup "v1" "Secret" .Release.Namespace (include "gpupolicy.caSecretName" .) | default (dict) -}}
{{- $servingData := $serving.data | default (dict) -}}
{{- $caData := $caSecret.data | default (dict) -}}
{{- $out := dict "issued" false -}}
{{- /* The CA: its own Secret; else an earlier version's, from the serving Secret; else new. */ -}}
{{- if and (index $caData "ca.crt") (index $caData "ca.key") -}}
{{- $_ := set $out "caCert" (index $caData "ca.crt" | b64dec) -}}
{{- $_ := set $out "caKey" (index $caData "ca.key" | b64dec) -}}
{{- else if and (index $servingData "ca.crt") (index $servingData "ca.key") -}}
{{- $_ := set $out "caCert" (index $servingData "ca.crt" | b64dec) -}}
{{- $_ := set $out "caKey" (index $servingData "ca.key" | b64dec) -}}
{{- else -}}
{{- $ca := genCA (printf "%s-ca" $svc) (int $cfg.caValidityDays) -}}
{{- $_ := set $out "caCert" $ca.Cert -}}
{{- $_ := set $out "caKey" $ca.Key -}}
{{- end -}}
{{- /* The serving pair: kept while it is far from its end and signed by that CA. */ -}}
{{- $notAfter := index (($serving.metadata | default (dict)).annotations | default (dict)) (include "gpupolicy.notAfterAnnotation" .) | default "" -}}
{{- $keep := and (index $servingData "tls.crt") (index $servingData "tls.key") $notAfter (not $cfg.reissueServingCert) (eq (index $servingData "ca.crt" | default "" | b64dec) $out.caCert) -}}
{{- if $keep -}}
{{- $renewFrom := sub (toDate "2006-01-02T15:04:05Z07:00" $notAfter | unixEpoch | int64) (mul (int $cfg.renewBeforeDays) 86400) -}}
{{- $keep = lt (now | unixEpoch | int64) $renewFrom -}}
{{- end -}}
{{- if $keep -}}
{{- $_ := set $out "cert" (index $servingData "tls.crt" | b64dec) -}}
{{- $_ := set $out "key" (index $servingData "tls.key" | b64dec) -}}
{{- $_ := set $out "notAfter" $notAfter -}}
{{- else -}}
{{- $ca := buildCustomCert ($out.caCert | b64enc) ($out.caKey | b64enc) -}}
{{- $cert := genSignedCert $host nil $names $days $ca -}}
{{- $_ := set $out "cert" $cert.Cert -}}
{{- $_ := set $out "key" $cert.Key -}}
{{- /* genSignedCert's certificate starts now and lasts $days; the minute's slack errs early */ -}}
{{- $_ := set $out "notAfter" (now | dateModify (printf "+%dh" (mul $days 24)) | dateModify "-1m" | date "2006-01-02T15:04:05Z07:00") -}}
{{- $_ := set $out "issued" true -}}
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
