{{/* The webhook Deployment; args: dict "root" (the chart context) "certs" (self-signed pair). */}}
{{- define "gpupolicy.deployment" -}}
{{- with .root }}
{{- $fullname := include "gpupolicy.fullname" . }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $fullname }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "gpupolicy.labels" . | nindent 4 }}
spec:
  replicas: {{ .Values.replicaCount }}
  revisionHistoryLimit: 5
  strategy:
    type: RollingUpdate
    rollingUpdate:
      {{- if and (eq .Values.podAntiAffinity "hard") (not .Values.affinity) (gt (int .Values.replicaCount) 1) }}
      # Required anti-affinity: a surge pod would need a node with no replica on it, which
      # clusters with as many nodes as replicas do not have, and the rollout would hang. One
      # pod at a time is replaced instead; the other replicas keep serving.
      maxUnavailable: 1
      maxSurge: 0
      {{- else }}
      # Never drop below the current count: with failurePolicy Fail the webhook is on the
      # critical path of every GPU pod.
      maxUnavailable: 0
      maxSurge: 1
      {{- end }}
  selector:
    matchLabels:
      {{- include "gpupolicy.selectorLabels" . | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "gpupolicy.selectorLabels" . | nindent 8 }}
        {{- with .Values.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        {{- if eq .Values.certs.mode "selfSigned" }}
        # A changed serving pair (first install, reissueServingCert) rolls the pods; a reused
        # one leaves them alone. The server also re-reads rotated files on its own.
        checksum/tls: {{ $.certs.cert | sha256sum }}
        {{- else }}
        checksum/tls: {{ printf "%s/%s/%s" .Values.certs.mode (include "gpupolicy.tlsSecretName" .) .Values.certs.caBundle | sha256sum }}
        {{- end }}
        # The server reads the workload kinds once, at start.
        checksum/workload-kinds: {{ toJson .Values.webhooks.workloadKinds | sha256sum }}
        {{- with .Values.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ include "gpupolicy.serviceAccountName" . }}
      terminationGracePeriodSeconds: {{ .Values.shutdown.terminationGracePeriodSeconds }}
      automountServiceAccountToken: true
      {{- with .Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      securityContext:
        {{- toYaml .Values.podSecurityContext | nindent 8 }}
      {{- if .Values.affinity }}
      affinity:
        {{- toYaml .Values.affinity | nindent 8 }}
      {{- else if eq .Values.podAntiAffinity "hard" }}
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - topologyKey: kubernetes.io/hostname
              labelSelector:
                matchLabels:
                  {{- include "gpupolicy.selectorLabels" . | nindent 18 }}
      {{- else if eq .Values.podAntiAffinity "soft" }}
      affinity:
        podAntiAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 100
              podAffinityTerm:
                topologyKey: kubernetes.io/hostname
                labelSelector:
                  matchLabels:
                    {{- include "gpupolicy.selectorLabels" . | nindent 20 }}
      {{- end }}
      {{- with .Values.topologySpreadConstraints }}
      topologySpreadConstraints:
        {{- range . }}
        {{- /* The release's pods, unless the entry brings its own labelSelector. */}}
        - {{ toYaml (merge (dict) . (dict "labelSelector" (dict "matchLabels" (include "gpupolicy.selectorLabels" $.root | fromYaml)))) | indent 10 | trim }}
        {{- end }}
      {{- end }}
      {{- with .Values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: webhook
          image: {{ include "gpupolicy.image" . }}
          imagePullPolicy: {{ .Values.image.pullPolicy }}
          command: ["gpupolicy"]
          args:
            - serve
            - --port=8443
            - --metrics-port={{ .Values.metrics.port }}
            - --tls-cert=/certs/tls.crt
            - --tls-key=/certs/tls.key
            - --policies=/policies
            - --workload-kinds=/etc/gpupolicy/workload-kinds.yaml
            - --workers={{ .Values.workers }}
            - --threads={{ .Values.threads }}
            - --log-level={{ .Values.logLevel }}
            # Names the serving certificate is checked against, and the namespace the
            # server never governs (its own, from POD_NAMESPACE, plus kube-system).
            - --service={{ $fullname }}
            {{- if .Values.clientAuth.enabled }}
            # Only clients with a certificate this CA signed (the API server) are answered.
            - --client-ca=/client-ca/ca.crt
            {{- end }}
          env:
            - name: POD_NAMESPACE
              valueFrom:
                fieldRef:
                  fieldPath: metadata.namespace
            {{- with .Values.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          ports:
            - name: https
              containerPort: 8443
              protocol: TCP
            - name: metrics
              containerPort: {{ .Values.metrics.port }}
              protocol: TCP
          # Probes use the plain-HTTP metrics listener: they never wait behind admissions on
          # the TLS port, and a busy webhook is not restarted for being busy.
          livenessProbe:
            httpGet:
              path: /healthz
              port: metrics
              scheme: HTTP
            {{- toYaml .Values.livenessProbe | nindent 12 }}
          readinessProbe:
            httpGet:
              path: /readyz
              port: metrics
              scheme: HTTP
            {{- toYaml .Values.readinessProbe | nindent 12 }}
          # On deletion the pod leaves the Service's endpoints while it keeps serving; only
          # after this delay does gunicorn get SIGTERM and stop accepting (then finishes what it
          # has within its 10 s graceful timeout). Without it the API server's kept-alive
          # connections are reset mid-admission.
          lifecycle:
            preStop:
              {{- if semverCompare ">=1.30.0-0" .Capabilities.KubeVersion.Version }}
              sleep:
                seconds: {{ .Values.shutdown.preStopSeconds }}
              {{- else }}
              # The kubelet's sleep action is on by default from 1.30 only.
              exec:
                command: ["python", "-c", "import time; time.sleep({{ .Values.shutdown.preStopSeconds }})"]
              {{- end }}
          resources:
            {{- toYaml .Values.resources | nindent 12 }}
          securityContext:
            {{- toYaml .Values.securityContext | nindent 12 }}
          volumeMounts:
            - name: certs
              mountPath: /certs
              readOnly: true
            - name: policies
              mountPath: /policies
              readOnly: true
            - name: workload-kinds
              mountPath: /etc/gpupolicy
              readOnly: true
            {{- if .Values.clientAuth.enabled }}
            - name: client-ca
              mountPath: /client-ca
              readOnly: true
            {{- end }}
            # The root filesystem is read-only: gunicorn's worker heartbeat files and the
            # Prometheus multiprocess files go here.
            - name: tmp
              mountPath: /tmp
      volumes:
        # The serving pair only: the Secret may also hold ca.key (selfSigned mode), which must
        # never be readable from a pod that faces the network.
        - name: certs
          secret:
            secretName: {{ include "gpupolicy.tlsSecretName" . }}
            items:
              - {key: tls.crt, path: tls.crt}
              - {key: tls.key, path: tls.key}
        - name: policies
          configMap:
            name: {{ $fullname }}-policies
        - name: workload-kinds
          configMap:
            name: {{ $fullname }}-workload-kinds
        {{- with .Values.clientAuth }}
        {{- if .enabled }}
        - name: client-ca
          {{- if .caSecret }}
          secret:
            secretName: {{ .caSecret }}
          {{- else }}
          configMap:
            name: {{ .caConfigMap }}
          {{- end }}
            items:
              - {key: {{ .key }}, path: ca.crt}
        {{- end }}
        {{- end }}
        - name: tmp
          emptyDir:
            medium: Memory
            sizeLimit: 64Mi
{{- end }}
{{- end -}}
