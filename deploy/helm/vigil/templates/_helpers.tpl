{{/* Labels every object carries; $component is speaker or controller. */}}
{{- define "vigil.labels" -}}
app.kubernetes.io/name: vigil
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{/* The Pod selector of a component (kept small: a DaemonSet's selector is immutable). */}}
{{- define "vigil.selector" -}}
app.kubernetes.io/name: vigil
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "vigil.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
