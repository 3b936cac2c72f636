{{/* Names: a release "billing" gives billing-worker, billing-reconciler, ... */}}
{{- define "billing.fullname" -}}
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

{{/* Labels of every object; a component's add billing.selector, the others app.kubernetes.io/instance. */}}
{{- define "billing.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/part-of: billing
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
{{- end -}}

{{/* Selector labels of one component: (list . "worker") */}}
{{- define "billing.selector" -}}
{{- $ := index . 0 -}}
app.kubernetes.io/name: billing-{{ index . 1 }}
app.kubernetes.io/instance: {{ $.Release.Name }}
{{- end -}}

{{- define "billing.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "billing.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "billing.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "billing.secretName" -}}
{{- default (printf "%s-secrets" (include "billing.fullname" .)) .Values.secrets.existingSecret -}}
{{- end -}}

{{/* The ConfigMap's data: the config values, HTTP_ADDR, and the *_FILE paths of the mounted secret keys. */}}
{{- define "billing.configData" -}}
{{- range $k, $v := .Values.config }}
{{ $k }}: {{ $v | quote }}
{{- end }}
HTTP_ADDR: {{ printf ":%d" (int .Values.metrics.port) | quote }}
{{- range $key, $var := .Values.secrets.keys }}
{{ $var }}: {{ printf "/var/run/secrets/billing/%s" $key | quote }}
{{- end }}
{{- end -}}

{{/* GOMEMLIMIT: 90% of a memory limit given in Mi or Gi (the rest is for what Go does not count). */}}
{{- define "billing.gomemlimit" -}}
{{- $m := toString .limits.memory -}}
{{- if hasSuffix "Gi" $m -}}
{{- div (mul (trimSuffix "Gi" $m | atoi) 1024 9) 10 }}MiB
{{- else if hasSuffix "Mi" $m -}}
{{- div (mul (trimSuffix "Mi" $m | atoi) 9) 10 }}MiB
{{- else -}}
{{- fail (printf "limits.memory %q: give it in Mi or Gi (GOMEMLIMIT is 90%% of it)" $m) -}}
{{- end -}}
{{- end -}}

{{- define "billing.secretVolume" -}}
- name: secrets
  secret:
    secretName: {{ include "billing.secretName" . }}
    defaultMode: 0440
{{- end -}}

{{- define "billing.secretMount" -}}
- name: secrets
  mountPath: /var/run/secrets/billing
  readOnly: true
{{- end -}}

{{/* Pod annotations that roll the pods when the config or the chart-made Secret changes. */}}
{{- define "billing.checksums" -}}
checksum/config: {{ include "billing.configData" . | sha256sum }}
{{- if not .Values.secrets.existingSecret }}
checksum/secret: {{ toJson .Values.secrets.values | sha256sum }}
{{- end }}
{{- end -}}

{{- define "billing.adminSecretName" -}}
{{- default (printf "%s-admin" (include "billing.fullname" .)) .Values.admin.token.existingSecret -}}
{{- end -}}

{{/* stringData of a chart-made Secret: the keys the programs read, refusing a
placeholder, so a forgotten password stops the render instead of deploying. */}}
{{- define "billing.secretData" -}}
{{- range $k, $_ := .Values.secrets.keys }}
{{- $v := index $.Values.secrets.values $k | default "" }}
{{- if or (not $v) (contains "CHANGE-ME" $v) }}
{{- fail (printf "secrets.values.%s is the placeholder %q: give the real value (--set-file secrets.values.%s=FILE) or a Secret you manage (secrets.existingSecret); a key the programs must not read leaves secrets.keys (--set secrets.keys.%s=null)" $k $v $k $k) }}
{{- end }}
{{ $k }}: {{ $v | quote }}
{{- end }}
{{- end -}}
