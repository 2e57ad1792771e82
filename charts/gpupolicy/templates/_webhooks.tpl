{{- /*
Both webhook configurations are ordinary release objects: `helm uninstall` deletes them first
thing, so nothing is left behind that could refuse pods. Emergency (webhook down and refusing
GPU pods): `kubectl delete validatingwebhookconfiguration <name>`; the API server never sends
webhook configurations to webhooks, so this always works.
*/ -}}
{{- /* One webhook per workloadKinds entry, so each matchCondition walks only its own paths. */}}
{{- define "gpupolicy.workloadWebhook" -}}
- name: {{ .kind.name }}.workloads.{{ .verb }}.gpupolicy.io
  {{- include "gpupolicy.webhookCommon" .root | nindent 2 }}
  failurePolicy: {{ .failurePolicy }}
  {{- with .reinvocationPolicy }}
  reinvocationPolicy: {{ . }}
  {{- end }}
  {{- include "gpupolicy.clientConfig" (dict "root" .root "path" (printf "/%s" .verb) "certs" .certs) | nindent 2 }}
  rules:
    - apiGroups: {{ toJson .kind.apiGroups }}
      apiVersions: ["*"]
      resources: {{ toJson .kind.resources }}
      operations: {{ toJson .operations }}
      scope: Namespaced
  {{- if .matchConditions }}
  {{- include "gpupolicy.matchConditions" (dict "root" .root "paths" .kind.podSpecPaths "slots" .kind.containerPaths "notControlled" (eq .verb "mutate") "specChanged" (eq .verb "validate")) | nindent 2 }}
  {{- end }}
{{- end }}
{{- define "gpupolicy.webhookCommon" -}}
admissionReviewVersions: ["v1"]
sideEffects: None
matchPolicy: Equivalent
timeoutSeconds: {{ .Values.webhooks.timeoutSeconds }}
namespaceSelector:
  {{- include "gpupolicy.namespaceSelector" . | nindent 2 }}
objectSelector:
  {{- toYaml .Values.webhooks.objectSelector | nindent 2 }}
{{- end }}
{{/* Both webhook configurations; args as gpupolicy.deployment. */}}
{{- define "gpupolicy.webhookConfigurations" -}}
{{- $root := .root }}
{{- $certs := .certs }}
{{- with .root }}
{{- $fullname := include "gpupolicy.fullname" . }}
{{- $mc := include "gpupolicy.matchConditionsOn" . }}
{{- $podPaths := list "spec" }}
{{- /* hideGPUsFromNonGPUContainers changes pods that ask for no GPU, so the pod mutation
       must see every pod: it fails open (Ignore by default), so this blocks nothing. */}}
{{- $hides := false }}
{{- range $name, $spec := .Values.policies }}
{{- if and $spec $spec.inject $spec.inject.hideGPUsFromNonGPUContainers }}{{ $hides = true }}{{ end }}
{{- end }}
{{- if .Values.webhooks.mutate.enabled }}
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: {{ $fullname }}
  labels:
    {{- include "gpupolicy.labels" . | nindent 4 }}
  {{- with include "gpupolicy.webhookAnnotations" . }}
  annotations:
    {{- . | nindent 4 }}
  {{- end }}
webhooks:
  - name: pods.mutate.gpupolicy.io
    {{- include "gpupolicy.webhookCommon" . | nindent 4 }}
    failurePolicy: {{ .Values.webhooks.mutate.failurePolicy }}
    reinvocationPolicy: {{ .Values.webhooks.mutate.reinvocationPolicy }}
    {{- include "gpupolicy.clientConfig" (dict "root" . "path" "/mutate" "certs" $certs) | nindent 4 }}
    rules:
      - apiGroups: [""]
        apiVersions: ["v1"]
        resources: ["pods"]
        operations: ["CREATE"]
        scope: Namespaced
    {{- if and $mc (not $hides) }}
    {{- include "gpupolicy.matchConditions" (dict "root" . "paths" $podPaths) | nindent 4 }}
    {{- end }}
  {{- if .Values.webhooks.mutate.templates }}
  {{- range .Values.webhooks.workloadKinds }}
  {{- include "gpupolicy.workloadWebhook" (dict "root" $root "certs" $certs "kind" . "verb" "mutate" "operations" (list "CREATE") "failurePolicy" $root.Values.webhooks.mutate.failurePolicy "reinvocationPolicy" $root.Values.webhooks.mutate.reinvocationPolicy "matchConditions" $mc) | nindent 2 }}
  {{- end }}
  {{- end }}
{{- end }}
{{- if .Values.webhooks.validate.enabled }}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: {{ $fullname }}
  labels:
    {{- include "gpupolicy.labels" . | nindent 4 }}
  {{- with include "gpupolicy.webhookAnnotations" . }}
  annotations:
    {{- . | nindent 4 }}
  {{- end }}
webhooks:
  - name: pods.validate.gpupolicy.io
    {{- include "gpupolicy.webhookCommon" . | nindent 4 }}
    failurePolicy: {{ .Values.webhooks.validate.failurePolicy }}
    {{- include "gpupolicy.clientConfig" (dict "root" . "path" "/validate" "certs" $certs) | nindent 4 }}
    rules:
      - apiGroups: [""]
        apiVersions: ["v1"]
        resources: ["pods"]
        operations: ["CREATE", "UPDATE"]
        scope: Namespaced
    {{- if $mc }}
    {{- include "gpupolicy.matchConditions" (dict "root" . "paths" $podPaths "specChanged" true "scheduling" true) | nindent 4 }}
    {{- end }}
  # `kubectl debug` adds containers through the pods/ephemeralcontainers subresource, which
  # the rule above does not cover: without this a debug container with
  # NVIDIA_VISIBLE_DEVICES=all would reach every GPU of the node (denyVisibleDevicesBypass).
  - name: pods-ephemeral.validate.gpupolicy.io
    {{- include "gpupolicy.webhookCommon" . | nindent 4 }}
    failurePolicy: {{ .Values.webhooks.validate.failurePolicy }}
    {{- include "gpupolicy.clientConfig" (dict "root" . "path" "/validate" "certs" $certs) | nindent 4 }}
    rules:
      - apiGroups: [""]
        apiVersions: ["v1"]
        resources: ["pods/ephemeralcontainers"]
        operations: ["UPDATE"]
        scope: Namespaced
    {{- if $mc }}
    {{- include "gpupolicy.matchConditions.ephemeral" . | nindent 4 }}
    {{- end }}
  {{- if .Values.webhooks.validate.claims }}
  # DRA claims are validated, never mutated (no policy injects into a claim): the mutating
  # configuration has no rule for them.
  - name: claims.validate.gpupolicy.io
    {{- include "gpupolicy.webhookCommon" . | nindent 4 }}
    failurePolicy: {{ .Values.webhooks.validate.failurePolicy }}
    {{- include "gpupolicy.clientConfig" (dict "root" . "path" "/validate" "certs" $certs) | nindent 4 }}
    rules:
      - apiGroups: ["resource.k8s.io"]
        apiVersions: ["*"]
        resources: ["resourceclaims", "resourceclaimtemplates"]
        operations: ["CREATE", "UPDATE"]
        scope: Namespaced
    {{- if $mc }}
    {{- include "gpupolicy.matchConditions.claims" . | nindent 4 }}
    {{- end }}
  {{- end }}
  {{- if .Values.webhooks.validate.workloads }}
  {{- range .Values.webhooks.workloadKinds }}
  {{- include "gpupolicy.workloadWebhook" (dict "root" $root "certs" $certs "kind" . "verb" "validate" "operations" (list "CREATE" "UPDATE") "failurePolicy" $root.Values.webhooks.validate.failurePolicy "matchConditions" $mc) | nindent 2 }}
  {{- end }}
  {{- end }}
{{- end }}
{{- end }}
{{- end -}}
