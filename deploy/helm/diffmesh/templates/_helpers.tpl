{{/* Names ---------------------------------------------------------------------------- */}}
{{- define "diffmesh.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "diffmesh.fullname" -}}
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

{{/* "<fullname>-<suffix>", at most 63 characters; a long name keeps a hash of the whole. */}}
{{- define "diffmesh.componentName" -}}
{{- $root := index . 0 -}}
{{- $suffix := index . 1 | lower | replace "." "-" | replace "_" "-" -}}
{{- $full := printf "%s-%s" (include "diffmesh.fullname" $root) $suffix -}}
{{- if le (len $full) 63 -}}
{{- $full -}}
{{- else -}}
{{- printf "%s-%s" ($full | trunc 54 | trimSuffix "-") ($full | sha256sum | trunc 8) -}}
{{- end -}}
{{- end -}}

{{/* Labels ------------------------------------------------------------------------------ */}}
{{- define "diffmesh.selectorLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "diffmesh.name" $root }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "diffmesh.labels" -}}
{{- $root := index . 0 -}}
{{ include "diffmesh.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" $root.Chart.Name $root.Chart.Version | replace "+" "_" }}
app.kubernetes.io/version: {{ $root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ $root.Release.Service }}
app.kubernetes.io/part-of: diffmesh
{{- with $root.Values.commonLabels }}
{{ toYaml . }}
{{- end -}}
{{- end -}}

{{/* Image: "repository:tag"; arg: (list $root $override) with $override {repository, tag} or {}. */}}
{{- define "diffmesh.image" -}}
{{- $root := index . 0 -}}
{{- $o := index . 1 | default dict -}}
{{- $repo := $o.repository | default $root.Values.image.repository -}}
{{- $tag := $o.tag | default $root.Values.image.tag | default $root.Chart.AppVersion -}}
{{- printf "%s:%s" $repo $tag -}}
{{- end -}}

{{- define "diffmesh.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "diffmesh.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Connections ------------------------------------------------------------------------ */}}
{{- define "diffmesh.natsUrl" -}}
{{- if .Values.nats.bundled -}}
{{- printf "nats://%s:4222" (include "diffmesh.componentName" (list . "nats")) -}}
{{- else -}}
{{- required "nats.url is required when nats.bundled is false" .Values.nats.url -}}
{{- end -}}
{{- end -}}

{{/* The node-local tensor-svc: a Service with internalTrafficPolicy Local. */}}
{{- define "diffmesh.tensorAddress" -}}
{{- printf "%s:%d" (include "diffmesh.componentName" (list . "tensor")) (int .Values.tensor.port) -}}
{{- end -}}

{{/* Node ids: per release, so two releases on one node keep separate shared-memory folders. */}}
{{- define "diffmesh.nodeId" -}}
{{- printf "%s.$(NODE_NAME)" .Release.Name -}}
{{- end -}}

{{- define "diffmesh.queueBackend" -}}
{{- .Values.scheduler.queue.backend -}}
{{- end -}}

{{/* Pod parts ---------------------------------------------------------------------------- */}}
{{/* Downward API and telemetry environment every diffmesh container gets. arg: (list $root $service) */}}
{{- define "diffmesh.commonEnv" -}}
{{- $root := index . 0 -}}
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
- name: NODE_NAME
  valueFrom:
    fieldRef:
      fieldPath: spec.nodeName
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- with $root.Values.telemetry }}
{{- if .otlpEndpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ .otlpEndpoint | quote }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: {{ .otlpProtocol | quote }}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: "k8s.namespace.name=$(POD_NAMESPACE),k8s.pod.name=$(POD_NAME),k8s.node.name=$(NODE_NAME),service.instance.id=$(POD_NAME)"
{{- if .sampler }}
- name: OTEL_TRACES_SAMPLER
  value: {{ .sampler | quote }}
{{- end }}
{{- if .samplerArg }}
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ .samplerArg | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The TLS Secret of a component; arg: (list $root $component). cert-manager: its own Certificate's. */}}
{{- define "diffmesh.tlsSecretName" -}}
{{- $root := index . 0 -}}
{{- $tls := $root.Values.tls -}}
{{- if $tls.certManager.enabled -}}
{{- printf "%s-tls" (include "diffmesh.componentName" (list $root (index . 1))) | trunc 253 -}}
{{- else if $tls.create -}}
{{- include "diffmesh.componentName" (list $root "tls") -}}
{{- else -}}
{{- required "tls.existingSecret is required when tls.enabled is true (or set tls.certManager.enabled or tls.create)" ($tls.existingSecret | default $tls.secretName) -}}
{{- end -}}
{{- end -}}

{{/* The DNS name clients check peers' certificates against (empty = the address dialled). */}}
{{- define "diffmesh.tlsServerName" -}}
{{- if .Values.tls.serverName -}}
{{- .Values.tls.serverName -}}
{{- else if .Values.tls.certManager.enabled -}}
{{- include "diffmesh.componentName" (list . "mesh") -}}
{{- end -}}
{{- end -}}

{{/*
TLS, NATS credential and NATS TLS flags (paths of mounted files, never secrets);
arg: (list $root $server) — $server adds --tls-require-client-cert.
*/}}
{{- define "diffmesh.tlsArgs" -}}
{{- $root := index . 0 -}}
{{- if $root.Values.tls.enabled }}
- --tls-ca=/etc/diffmesh/tls/ca.crt
- --tls-cert=/etc/diffmesh/tls/tls.crt
- --tls-key=/etc/diffmesh/tls/tls.key
{{- with include "diffmesh.tlsServerName" $root }}
- --tls-server-name={{ . }}
{{- end }}
{{- if and (index . 1) $root.Values.tls.requireClientCert }}
- --tls-require-client-cert=true
{{- end }}
{{- end }}
{{- if $root.Values.nats.auth.existingSecret }}
- --nats-credentials=/etc/diffmesh/nats/credentials
{{- end }}
{{- if $root.Values.nats.tls.enabled }}
{{- if not $root.Values.tls.enabled }}
{{- fail "nats.tls.enabled needs tls.enabled: the services trust the mesh's CA and present their certificates to NATS" }}
{{- end }}
- --nats-tls-ca=/etc/diffmesh/tls/ca.crt
- --nats-tls-cert=/etc/diffmesh/tls/tls.crt
- --nats-tls-key=/etc/diffmesh/tls/tls.key
{{- end }}
{{- end -}}

{{/* arg: (list $root $component) */}}
{{- define "diffmesh.commonVolumeMounts" -}}
{{- $root := index . 0 -}}
- name: tmp
  mountPath: /tmp
{{- if $root.Values.tls.enabled }}
- name: tls
  mountPath: /etc/diffmesh/tls
  readOnly: true
{{- end }}
{{- if $root.Values.nats.auth.existingSecret }}
- name: nats-credentials
  mountPath: /etc/diffmesh/nats
  readOnly: true
{{- end }}
{{- if include "diffmesh.readsTenants" . }}
- name: tenants
  mountPath: /etc/diffmesh/tenants
  readOnly: true
{{- end }}
{{- if include "diffmesh.capabilityKeySecret" . }}
- name: capability-key
  mountPath: /etc/diffmesh/capability
  readOnly: true
{{- end }}
{{- end -}}

{{/* "true" when the component (scheduler, gateway) reads the tenants file. arg: (list $root $component) */}}
{{- define "diffmesh.readsTenants" -}}
{{- if and (index . 0).Values.tenants.existingSecret (has (index . 1) (list "scheduler" "gateway")) -}}true{{- end -}}
{{- end -}}

{{/* The capability key's Secret, for tensor-svc. arg: (list $root $component) */}}
{{- define "diffmesh.capabilityKeySecret" -}}
{{- $cap := (index . 0).Values.tensor.capabilities -}}
{{- if and (eq (index . 1) "tensor") $cap.enabled $cap.existingSecret -}}{{ $cap.existingSecret }}{{- end -}}
{{- end -}}

{{/* --tenants-file (scheduler, gateway) and the capability flags (tensor-svc). arg: (list $root $component) */}}
{{- define "diffmesh.tenancyArgs" -}}
{{- if include "diffmesh.readsTenants" . }}
- --tenants-file=/etc/diffmesh/tenants/tenants.yaml
{{- end }}
{{- if eq (index . 1) "tensor" }}
{{- if not (index . 0).Values.tensor.capabilities.enabled }}
- --capabilities=false
{{- else if include "diffmesh.capabilityKeySecret" . }}
- --capability-key-file=/etc/diffmesh/capability/capability.key
{{- end }}
{{- end }}
{{- end -}}

{{/* arg: (list $root $component): the component names its TLS Secret (cert-manager). */}}
{{- define "diffmesh.commonVolumes" -}}
{{- $root := index . 0 -}}
- name: tmp
  emptyDir:
    sizeLimit: 256Mi
{{- if $root.Values.tls.enabled }}
- name: tls
  secret:
    secretName: {{ include "diffmesh.tlsSecretName" . }}
    defaultMode: 0440
{{- end }}
{{- with $root.Values.nats.auth }}
{{- if .existingSecret }}
- name: nats-credentials
  secret:
    secretName: {{ .existingSecret }}
    defaultMode: 0440
    items:
      - key: {{ if include "diffmesh.natsPerRole" $root }}{{ include "diffmesh.natsRole" (index $ 1) }}.seed{{ else }}{{ .credentialsKey }}{{ end }}
        path: credentials
{{- end }}
{{- end }}
{{- if include "diffmesh.readsTenants" . }}
- name: tenants
  secret:
    secretName: {{ $root.Values.tenants.existingSecret }}
    defaultMode: 0440
    items:
      - key: {{ $root.Values.tenants.key }}
        path: tenants.yaml
{{- end }}
{{- with include "diffmesh.capabilityKeySecret" . }}
- name: capability-key
  secret:
    secretName: {{ . }}
    defaultMode: 0440
    items:
      - key: {{ $root.Values.tensor.capabilities.key }}
        path: capability.key
{{- end }}
{{- end -}}

{{/*
A cert-manager Certificate for one component, when tls.certManager is on (a document with its
own leading ---). arg: (list $root $component $identity): $identity is the URI SAN
urn:diffmesh:<identity> that peerIdentity() reads (scheduler, tensor-svc, gateway, stage:<pool>).
*/}}
{{- define "diffmesh.certificate" -}}
{{- $root := index . 0 -}}
{{- $component := index . 1 -}}
{{- $tls := $root.Values.tls -}}
{{- if and $tls.enabled $tls.certManager.enabled }}
{{- $name := include "diffmesh.componentName" (list $root $component) }}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: {{ $name }}
  labels:
    {{- include "diffmesh.labels" (list $root $component) | nindent 4 }}
spec:
  secretName: {{ include "diffmesh.tlsSecretName" (list $root $component) }}
  commonName: {{ index . 2 | quote }}
  duration: {{ $tls.certManager.duration }}
  renewBefore: {{ $tls.certManager.renewBefore }}
  privateKey:
    algorithm: ECDSA
    size: 256
    rotationPolicy: Always
  usages: [digital signature, key encipherment, server auth, client auth]
  dnsNames:
    - {{ include "diffmesh.tlsServerName" $root }}
    - {{ $name }}
    - {{ printf "%s.%s.svc" $name $root.Release.Namespace }}
  uris:
    - {{ printf "urn:diffmesh:%s" (index . 2) | quote }}
  issuerRef:
    name: {{ required "tls.certManager.issuerRef.name is required with tls.certManager.enabled" $tls.certManager.issuerRef.name }}
    kind: {{ $tls.certManager.issuerRef.kind }}
    group: {{ $tls.certManager.issuerRef.group }}
{{- end }}
{{- end -}}

{{/*
gRPC health probes. The kubelet's `grpc:` probe speaks plaintext only; with TLS the probe
runs the image's healthcheck.mjs, which reads the address and TLS files the entrypoint wrote.
arg: (list $root $port $kind) with $kind startup | readiness | liveness.
*/}}
{{- define "diffmesh.grpcProbe" -}}
{{- $root := index . 0 -}}
{{- if $root.Values.tls.enabled }}
exec:
  command: ["node", "/app/deploy/docker/healthcheck.mjs"]
{{- else }}
grpc:
  port: {{ index . 1 }}
{{- end }}
{{- end -}}

{{- define "diffmesh.podSecurity" -}}
{{- with .Values.podSecurityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
serviceAccountName: {{ include "diffmesh.serviceAccountName" . }}
automountServiceAccountToken: false
{{- end -}}

{{/* Pools ------------------------------------------------------------------------------- */}}
{{/* The service that runs a stage. */}}
{{- define "diffmesh.stageService" -}}
{{- $stage := . -}}
{{- if has $stage (list "text_encoding" "text_encoding_2") -}}
encoder-svc
{{- else if eq $stage "denoising" -}}
dit-svc
{{- else if has $stage (list "vae_decoding" "image_encoding") -}}
vae-svc
{{- else -}}
{{- fail (printf "unknown stage %q (expected text_encoding, text_encoding_2, image_encoding, denoising or vae_decoding)" $stage) -}}
{{- end -}}
{{- end -}}

{{/* A pool's settings: stageDefaults overridden by the pool (maps merge; lists replace). Returns YAML. arg: (list $root $name $pool) */}}
{{- define "diffmesh.pool" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- $p := mergeOverwrite (deepCopy $root.Values.stageDefaults) (deepCopy (index . 2)) -}}
{{- $_ := set $p "name" $name -}}
{{- if not $p.stage -}}{{- fail (printf "pools.%s.stage is required" $name) -}}{{- end -}}
{{- $_ := set $p "service" ($p.service | default (include "diffmesh.stageService" $p.stage)) -}}
{{- $auto := mergeOverwrite (deepCopy $root.Values.autoscaling) (deepCopy ($p.autoscaling | default dict)) -}}
{{- $_ := set $p "autoscaling" $auto -}}
{{- toYaml $p -}}
{{- end -}}

{{/* PromQL label matcher value: regex-escaped and escaped for a double-quoted string. */}}
{{- define "diffmesh.promRegex" -}}
{{- $parts := list -}}
{{- range . -}}{{- $parts = append $parts (regexQuoteMeta .) -}}{{- end -}}
{{- join "|" $parts | replace "\\" "\\\\" -}}
{{- end -}}

{{/* How the schedulers' series of one pool combine: sum (own queues) or max (a shared one). */}}
{{- define "diffmesh.aggregation" -}}
{{- $root := index . 0 -}}
{{- $auto := index . 1 -}}
{{- if ne $auto.aggregation "auto" -}}
{{- $auto.aggregation -}}
{{- else if has $root.Values.scheduler.queue.backend (list "redis" "jetstream") -}}
max
{{- else -}}
sum
{{- end -}}
{{- end -}}

{{/* The plan entries (model or pattern names) that route work through a pool. arg: (list $root $pool) */}}
{{- define "diffmesh.poolPlanNames" -}}
{{- $root := index . 0 -}}
{{- $pool := index . 1 -}}
{{- $names := list -}}
{{- range $root.Values.registry.plans -}}
{{- $plan := . -}}
{{- range .stages -}}
{{- if eq .pool $pool -}}{{- $names = append $names ($plan.model | default $plan.pattern) -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson (uniq $names) -}}
{{- end -}}

{{/* The Secret holding AWS_* / REDIS_URL, or "". */}}
{{- define "diffmesh.credentialsSecret" -}}
{{- if .Values.credentials.existingSecret -}}
{{- .Values.credentials.existingSecret -}}
{{- else if .Values.credentials.create -}}
{{- include "diffmesh.componentName" (list . "credentials") -}}
{{- end -}}
{{- end -}}

{{- define "diffmesh.envFromCredentials" -}}
{{- with include "diffmesh.credentialsSecret" . }}
envFrom:
  - secretRef:
      name: {{ . }}
{{- end }}
{{- end -}}

{{/* Every pool: the built-in ones (when enabled) under `pools`. Returns YAML. */}}
{{- define "diffmesh.pools" -}}
{{- $pools := dict -}}
{{- if .Values.builtinPools.enabled -}}
{{- $pools = dict
  "encoder-tiny" (dict "stage" "text_encoding" "models" (list "diffmesh/tiny-shapes") "capacity" 2)
  "dit-tiny" (dict "stage" "denoising" "models" (list "diffmesh/tiny-shapes") "capacity" 4)
  "vae-tiny" (dict "stage" "vae_decoding" "models" (list "diffmesh/tiny-shapes") "capacity" 2)
  "vae-encoder-tiny" (dict "stage" "image_encoding" "models" (list "diffmesh/tiny-shapes") "capacity" 2) -}}
{{- end -}}
{{- range $k, $v := .Values.pools -}}
{{- $_ := set $pools $k $v -}}
{{- end -}}
{{- toYaml $pools -}}
{{- end -}}

{{/* The NATS role of a component (scheduler, tensor, gateway, pool-*): its nkey's permissions. */}}
{{- define "diffmesh.natsRole" -}}
{{- if eq . "scheduler" }}scheduler{{ else if eq . "tensor" }}tensor-svc{{ else if eq . "gateway" }}gateway{{ else }}stage{{ end -}}
{{- end -}}

{{/* "true" when nats.auth.roles names the four roles' public keys (all or none). */}}
{{- define "diffmesh.natsPerRole" -}}
{{- $r := .Values.nats.auth.roles -}}
{{- $set := 0 -}}
{{- range $k := list "scheduler" "tensorSvc" "gateway" "stage" }}{{ if index $r $k }}{{ $set = add1 $set }}{{ end }}{{ end -}}
{{- if and (gt $set 0) (lt $set 4) -}}
{{- fail "nats.auth.roles needs the public keys of all four roles (scheduler, tensorSvc, gateway, stage), or none" -}}
{{- end -}}
{{- if eq $set 4 -}}
{{- if not .Values.nats.auth.existingSecret -}}
{{- fail "nats.auth.roles needs nats.auth.existingSecret (the Secret with <role>.seed)" -}}
{{- end -}}
true
{{- end -}}
{{- end -}}

{{/*
What the nkey of one role may do, as nats-server permissions (the same as diffmesh up's, see
cli/src/mesh/nats-permissions.ts; deploy:check compares them): discovery for every role, its
own replies (_INBOX.<its key>.>), and for the scheduler JetStream, its requests bucket and its
queue subjects. arg: (list $role $publicKey)
*/}}
{{- define "diffmesh.natsPermissions" -}}
{{- $role := index . 0 -}}
{{- $key := index . 1 -}}
{{- $pub := list "$SRV.>" "diffmesh.discovery.>" -}}
{{- $sub := list "$SRV.>" "diffmesh.discovery.>" (printf "_INBOX.%s.>" $key) -}}
{{- if eq $role "scheduler" -}}
{{- $pub = concat $pub (list "$JS.API.>" "$JS.ACK.>" "$KV.diffmesh_requests.>" "diffmesh.t.>" "diffmesh.chg" "diffmesh.q") -}}
{{- $sub = concat $sub (list "diffmesh.chg" "diffmesh.q") -}}
{{- end -}}
{ publish: { allow: [{{ range $i, $s := $pub }}{{ if $i }}, {{ end }}"{{ $s }}"{{ end }}] }, subscribe: { allow: [{{ range $i, $s := $sub }}{{ if $i }}, {{ end }}"{{ $s }}"{{ end }}] }, allow_responses: true }
{{- end -}}
