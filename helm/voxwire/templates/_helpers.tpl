{{/* The release's full name, at most 63 characters (with room for suffixes). */}}
{{- define "voxwire.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "voxwire.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "voxwire.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "voxwire.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: voxwire
{{- end -}}

{{/* Pods of one component: (dict "root" $ "component" "gateway") */}}
{{- define "voxwire.selector" -}}
app.kubernetes.io/name: {{ include "voxwire.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "voxwire.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "voxwire.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "voxwire.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- /* a worker pool's image: the GPU variant (the tag with image.gpuTagSuffix) when the
pool has GPUs, for the CUDA libraries it loads; dict "root" . "pool" $pool */}}
{{- define "voxwire.poolImage" -}}
{{- $gpu := gt (int (.pool.gpus | default 0)) 0 -}}
{{- printf "%s%s" (include "voxwire.image" .root) (ternary .root.Values.image.gpuTagSuffix "" $gpu) -}}
{{- end -}}

{{- define "voxwire.secretName" -}}
{{- default (printf "%s-settings" (include "voxwire.fullname" .)) .Values.existingSecret -}}
{{- end -}}

{{- define "voxwire.gatewayUrl" -}}
{{- printf "http://%s-gateway.%s.svc:%v" (include "voxwire.fullname" .) .Release.Namespace .Values.gateway.service.port -}}
{{- end -}}

{{/* The broker voxwire's own clients use: this chart's EMQX when it runs one. */}}
{{- define "voxwire.mqttUrl" -}}
{{- if .Values.emqx.enabled -}}
{{- printf "mqtt://%s-emqx-listeners.%s.svc:1883" (include "voxwire.fullname" .) .Release.Namespace -}}
{{- else -}}
{{- .Values.config.mqttUrl -}}
{{- end -}}
{{- end -}}

{{/* The broker setting: emqx when this chart runs EMQX. */}}
{{- define "voxwire.broker" -}}
{{- if .Values.emqx.enabled -}}emqx{{- else -}}{{ .Values.config.broker }}{{- end -}}
{{- end -}}

{{/* What every voxwire container reads: the ConfigMap and the Secret. */}}
{{- define "voxwire.envFrom" -}}
- configMapRef:
    name: {{ include "voxwire.fullname" . }}-settings
- secretRef:
    name: {{ include "voxwire.secretName" . }}
{{- end -}}

{{/* Writable folders on a read-only root filesystem, models, shared audio. */}}
{{- define "voxwire.volumeMounts" -}}
- name: tmp
  mountPath: /tmp
- name: data
  mountPath: /var/lib/voxwire
- name: models
  mountPath: {{ .Values.models.cacheDir }}
{{- if .Values.config.mqttCa.configMap }}
- name: mqtt-ca
  mountPath: /etc/voxwire/mqtt-ca
  readOnly: true
{{- end }}
{{- if eq .Values.config.blobStore "local" }}
- name: shared
  mountPath: {{ .Values.sharedVolume.mountPath }}
{{- end }}
{{- end -}}

{{- define "voxwire.volumes" -}}
- name: tmp
  emptyDir: {}
- name: data
  emptyDir: {}
- name: models
{{- if .Values.models.existingClaim }}
  persistentVolumeClaim:
    claimName: {{ .Values.models.existingClaim }}
{{- else }}
  emptyDir: {}
{{- end }}
{{- if .Values.config.mqttCa.configMap }}
- name: mqtt-ca
  configMap:
    name: {{ .Values.config.mqttCa.configMap }}
{{- end }}
{{- if eq .Values.config.blobStore "local" }}
- name: shared
  persistentVolumeClaim:
    claimName: {{ required "config.blobStore=local needs sharedVolume.existingClaim (ReadWriteMany)" .Values.sharedVolume.existingClaim }}
{{- end }}
{{- end -}}

{{/* The pod-level fields every voxwire pod shares. */}}
{{- define "voxwire.podCommon" -}}
serviceAccountName: {{ include "voxwire.serviceAccountName" . }}
automountServiceAccountToken: false
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* An HTTP probe: (dict "path" "/readyz" "port" "http" "timing" .Values.probes.readiness) */}}
{{- define "voxwire.probe" -}}
httpGet:
  path: {{ .path }}
  port: {{ .port }}
{{- toYaml .timing | nindent 0 }}
{{- end -}}
