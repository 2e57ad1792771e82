{{/*
CEL for the webhooks' matchConditions: true when an object carries a GPU resource (a key with
one of webhooks.gpuResourcePrefixes in any container's requests or limits), an env var
NVIDIA_VISIBLE_DEVICES, KAI share annotations or DRA ResourceClaims (CEL cannot see which
device class a claim names, so every pod spec with claims is sent), in any of its pod specs. Every step is guarded with has(): an error in a
match condition would refuse the request under failurePolicy Fail.
*/}}

{{/*
A container-like object at CEL expression `.c` that makes an object GPU-related: its
ResourceRequirements (field `.rf`, default `resources`) or, for Spark, `.gf: {name, quantity}`.
*/}}
{{- define "gpupolicy.cel.container" -}}
{{- $alts := list -}}
{{- range .root.Values.webhooks.gpuResourcePrefixes -}}
{{- $alts = append $alts (regexQuoteMeta .) -}}
{{- end -}}
{{- /* a DeviceClass's extendedResourceName is any name (the Kubernetes docs: example.com/gpu) */ -}}
{{- $alts = append $alts "[^/]+/[^/]*gpu" -}}
{{- $re := printf "r'^(%s)'" (join "|" $alts) -}}
{{- $r := printf "%s.%s" .c (.rf | default "resources") -}}
(has({{ $r }}) && [has({{ $r }}.requests) ? {{ $r }}.requests : {}, has({{ $r }}.limits) ? {{ $r }}.limits : {}].exists(m, m.exists(r, r.matches({{ $re }})))) || (has({{ .c }}.env) && {{ .c }}.env.exists(e, e.name == 'NVIDIA_VISIBLE_DEVICES'))
{{- if .gf }} || (has({{ .c }}.{{ .gf }}) && has({{ .c }}.{{ .gf }}.name) && {{ .c }}.{{ .gf }}.name.matches({{ $re }})){{ end }}
{{- end -}}

{{/*
A pod spec at CEL expression `.ps`: its containers and init containers, the container-like
`.slots` of its kind (workloadKinds[].containerPaths), and the KAI Scheduler share annotations
in the metadata beside it.
*/}}
{{- define "gpupolicy.cel.podSpec" -}}
((has({{ .ps }}.containers) ? {{ .ps }}.containers : []) + (has({{ .ps }}.initContainers) ? {{ .ps }}.initContainers : [])).exists(c, {{ include "gpupolicy.cel.container" (dict "c" "c" "root" .root) }})
{{- $ps := .ps -}}
{{- $root := .root -}}
{{- range $i, $slot := .slots -}}
{{- $s := kindIs "string" $slot | ternary (dict "path" $slot) $slot -}}
{{- $path := eq $s.path "." | ternary list (splitList "." $s.path) }} || ({{ include "gpupolicy.cel.walk" (dict "expr" $ps "path" $path "depth" (add 10 (mul 10 $i)) "root" $root "slot" $s) }})
{{- end -}}
{{- if hasSuffix ".spec" .ps -}}
{{- $meta := printf "%s.metadata" (trimSuffix ".spec" .ps) }} || (has({{ $meta }}) && has({{ $meta }}.annotations) && ['gpu-fraction', 'gpu-memory'].exists(a, a in {{ $meta }}.annotations))
{{- end }} || (has({{ .ps }}.resourceClaims) && size({{ .ps }}.resourceClaims) > 0)
{{- end -}}

{{/*
Walk a dot path (`spec.template.spec`, `*` = every map value, `name[]` = every list item) from
CEL expression `.expr`, guarding each step, and test what is at its end: a pod spec, or the
container-like `.slot` when given.
*/}}
{{- define "gpupolicy.cel.walk" -}}
{{- if not .path -}}
{{- if .slot -}}
{{ include "gpupolicy.cel.container" (dict "c" .expr "rf" .slot.resourcesField "gf" .slot.gpuField "root" .root) }}
{{- else -}}
{{ include "gpupolicy.cel.podSpec" (dict "ps" .expr "slots" .slots "root" .root) }}
{{- end -}}
{{- else -}}
{{- $head := first .path -}}
{{- $rest := rest .path -}}
{{- if eq $head "*" -}}
{{- $k := printf "k%d" (int .depth) -}}
{{ .expr }}.exists({{ $k }}, {{ include "gpupolicy.cel.walk" (dict "expr" (printf "%s[%s]" .expr $k) "path" $rest "depth" (add1 .depth) "root" .root "slot" .slot "slots" .slots) }})
{{- else if hasSuffix "[]" $head -}}
{{- $field := printf "%s.%s" .expr (trimSuffix "[]" $head) -}}
{{- $i := printf "i%d" (int .depth) -}}
has({{ $field }}) && {{ $field }}.exists({{ $i }}, {{ include "gpupolicy.cel.walk" (dict "expr" $i "path" $rest "depth" (add1 .depth) "root" .root "slot" .slot "slots" .slots) }})
{{- else -}}
{{- $next := printf "%s.%s" .expr $head -}}
has({{ $next }}) && ({{ include "gpupolicy.cel.walk" (dict "expr" $next "path" $rest "depth" .depth "root" .root "slot" .slot "slots" .slots) }})
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
True when an UPDATE changes one of webhooks.schedulingMetadata's annotations or labels (set,
removed or given another value): each is read as a list of at most one value, so absent and
empty differ.
*/}}
{{- define "gpupolicy.cel.schedulingChanged" -}}
{{- $terms := list -}}
{{- range $field, $keys := .Values.webhooks.schedulingMetadata -}}
{{- if $keys -}}
{{- $new := printf "(has(object.metadata) && has(object.metadata.%s) && k in object.metadata.%s ? [object.metadata.%s[k]] : [])" $field $field $field -}}
{{- $old := printf "(has(oldObject.metadata) && has(oldObject.metadata.%s) && k in oldObject.metadata.%s ? [oldObject.metadata.%s[k]] : [])" $field $field $field -}}
{{- $terms = append $terms (printf "[%s].exists(k, %s != %s)" (include "gpupolicy.cel.quotedList" $keys) $new $old) -}}
{{- end -}}
{{- end -}}
{{- if $terms }}{{ join " || " $terms }}{{ else }}false{{ end -}}
{{- end -}}

{{/* The matchConditions block for a list of pod-spec dot paths (`.paths`). */}}
{{- define "gpupolicy.matchConditions" -}}
{{- $terms := list -}}
{{- range .paths -}}
{{- $terms = append $terms (printf "(%s)" (include "gpupolicy.cel.walk" (dict "expr" "object" "path" (splitList "." .) "depth" 0 "root" $.root "slots" $.slots))) -}}
{{- end -}}
matchConditions:
  - name: gpu-related
    expression: {{ join " || " $terms | quote }}
  {{- if and .specChanged .scheduling }}
  # An UPDATE that leaves the spec and what GPU schedulers read alone (other labels and
  # annotations, finalizers: e.g. the Job controller releasing its pods) has nothing to
  # re-check and must not wait on the webhook. One that adds a KAI share to a pending pod does.
  - name: spec-or-scheduling-changed
    expression: {{ printf "request.operation != 'UPDATE' || !has(object.spec) || !has(oldObject.spec) || object.spec != oldObject.spec || %s" (include "gpupolicy.cel.schedulingChanged" .root) | quote }}
  {{- else if .specChanged }}
  # An UPDATE that leaves the spec alone (labels, annotations, finalizers) has nothing to
  # re-check and must not wait on the webhook.
  - name: spec-changed
    expression: "request.operation != 'UPDATE' || !has(object.spec) || !has(oldObject.spec) || object.spec != oldObject.spec"
  {{- end }}
  {{- if .notControlled }}
  # A ReplicaSet made by a Deployment (or an Argo Rollout) must keep its owner's template: the
  # owner finds it by comparing templates, and a mutated copy would make it create another.
  # Owned objects are left alone; their pods are mutated when they are created.
  - name: not-controlled
    expression: "!has(object.metadata) || !has(object.metadata.ownerReferences) || !object.metadata.ownerReferences.exists(o, has(o.controller) && o.controller == true)"
  {{- end }}
{{- end -}}

{{/*
matchConditions of the `kubectl debug` webhook (UPDATE of pods/ephemeralcontainers). The object
sent is the whole Pod; only its ephemeral containers are new, so only they decide. Ephemeral
containers cannot carry resources, so in practice this is NVIDIA_VISIBLE_DEVICES; the resource
test is kept so the condition never misses what the pod condition would catch.
*/}}
{{- define "gpupolicy.matchConditions.ephemeral" -}}
matchConditions:
  - name: gpu-related-debug-container
    expression: {{ printf "has(object.spec) && has(object.spec.ephemeralContainers) && object.spec.ephemeralContainers.exists(c, %s)" (include "gpupolicy.cel.container" (dict "c" "c" "root" .)) | quote }}
{{- end -}}

{{/*
DRA claims (webhooks.validate.claims): a ResourceClaim (spec.devices) or ResourceClaimTemplate
(spec.spec.devices) is GPU-related when a request names a device class matching
webhooks.gpuDeviceClasses (globs, made into one anchored RE2): v1 `exactly.deviceClassName`,
any `firstAvailable[].deviceClassName`, or v1beta1's flat `deviceClassName`. Every step is
guarded with has(), so a claim missing any of it is simply not sent.
*/}}
{{- define "gpupolicy.cel.deviceClassRegex" -}}
{{- $alts := list -}}
{{- range .Values.webhooks.gpuDeviceClasses -}}
{{- $alts = append $alts (regexQuoteMeta . | replace "\\*" ".*") -}}
{{- end -}}
{{- printf "r'^(%s)$'" (join "|" $alts) -}}
{{- end -}}

{{- define "gpupolicy.matchConditions.claims" -}}
{{- $devices := "[has(object.spec.devices) ? object.spec.devices : {}, has(object.spec.spec) && has(object.spec.spec.devices) ? object.spec.spec.devices : {}]" -}}
{{- $requests := "(has(r.firstAvailable) ? r.firstAvailable : []) + [has(r.exactly) ? r.exactly : {}, r]" -}}
matchConditions:
  - name: gpu-related
    expression: {{ printf "has(object.spec) && %s.exists(d, has(d.requests) && d.requests.exists(r, (%s).exists(q, has(q.deviceClassName) && q.deviceClassName.matches(%s))))" $devices $requests (include "gpupolicy.cel.deviceClassRegex" .) | quote }}
  # Claims and templates cannot change their spec: an UPDATE (labels, finalizers) has
  # nothing to re-check.
  - name: spec-changed
    expression: "request.operation != 'UPDATE' || !has(object.spec) || !has(oldObject.spec) || object.spec != oldObject.spec"
  {{- with .Values.webhooks.validate.claimControllers }}
  # The claim the resource claim controller makes for one pod from a template (or the
  # scheduler for a DRA-served extended resource): what it copies was checked when it was
  # written. Who sent the request decides, never the claim's annotations or owners, which
  # any user who may create claims can write.
  - name: not-from-a-claim-controller
    expression: {{ printf "!has(request.userInfo) || !has(request.userInfo.username) || !(request.userInfo.username in [%s])" (include "gpupolicy.cel.quotedList" .) | quote }}
  {{- end }}
{{- end -}}


{{/* A list of strings as a CEL list's items: 'a', 'b' (single quotes escaped). */}}
{{- define "gpupolicy.cel.quotedList" -}}
{{- $quoted := list -}}
{{- range . }}{{ $quoted = append $quoted (printf "'%s'" (replace "'" "\\'" .)) }}{{ end -}}
{{- join ", " $quoted -}}
{{- end -}}
