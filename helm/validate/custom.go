package main

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ScaledObject is the part of KEDA's keda.sh/v1alpha1 ScaledObject this chart
// renders (field names as in KEDA's CRD); any other field is refused.
type ScaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              ScaledObjectSpec `json:"spec"`
}

type ScaledObjectSpec struct {
	ScaleTargetRef  ScaleTarget    `json:"scaleTargetRef"`
	MinReplicaCount *int32         `json:"minReplicaCount,omitempty"`
	MaxReplicaCount *int32         `json:"maxReplicaCount,omitempty"`
	PollingInterval *int32         `json:"pollingInterval,omitempty"`
	CooldownPeriod  *int32         `json:"cooldownPeriod,omitempty"`
	Triggers        []ScaleTrigger `json:"triggers"`
}

type ScaleTarget struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Name       string `json:"name"`
}

type ScaleTrigger struct {
	Type     string            `json:"type"`
	Name     string            `json:"name,omitempty"`
	Metadata map[string]string `json:"metadata"`
}

// the metadata KEDA's kafka scaler needs
var kafkaMetadata = []string{"bootstrapServers", "consumerGroup", "topic", "lagThreshold"}

func (s *ScaledObject) check() error {
	if s.Spec.ScaleTargetRef.Name == "" {
		return errors.New("scaleTargetRef.name is empty")
	}
	if len(s.Spec.Triggers) == 0 {
		return errors.New("no trigger")
	}
	min, max := s.Spec.MinReplicaCount, s.Spec.MaxReplicaCount
	if min != nil && max != nil && *min > *max {
		return fmt.Errorf("minReplicaCount %d > maxReplicaCount %d", *min, *max)
	}
	for _, t := range s.Spec.Triggers {
		if t.Type != "kafka" {
			return fmt.Errorf("trigger type %q: this chart renders kafka triggers only", t.Type)
		}
		for _, field := range kafkaMetadata {
			if t.Metadata[field] == "" {
				return fmt.Errorf("kafka trigger without %s", field)
			}
		}
	}
	return nil
}

// EMQX is the part of the EMQX operator's apps.emqx.io/v2beta1 EMQX this chart
// renders (field names as in the operator's CRD); any other field is refused.
type EMQX struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              EMQXSpec `json:"spec"`
}

type EMQXSpec struct {
	Image                    string               `json:"image"`
	ImagePullPolicy          corev1.PullPolicy    `json:"imagePullPolicy,omitempty"`
	Config                   EMQXConfig           `json:"config"`
	CoreTemplate             EMQXNodeTemplate     `json:"coreTemplate"`
	ListenersServiceTemplate *EMQXServiceTemplate `json:"listenersServiceTemplate,omitempty"`
}

type EMQXConfig struct {
	Mode string `json:"mode,omitempty"`
	Data string `json:"data"`
}

type EMQXNodeTemplate struct {
	Metadata metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec     EMQXNodeSpec      `json:"spec"`
}

type EMQXNodeSpec struct {
	Replicas                 *int32                            `json:"replicas,omitempty"`
	Resources                corev1.ResourceRequirements       `json:"resources,omitempty"`
	Env                      []corev1.EnvVar                   `json:"env,omitempty"`
	NodeSelector             map[string]string                 `json:"nodeSelector,omitempty"`
	Tolerations              []corev1.Toleration               `json:"tolerations,omitempty"`
	PodSecurityContext       *corev1.PodSecurityContext        `json:"podSecurityContext,omitempty"`
	ContainerSecurityContext *corev1.SecurityContext           `json:"containerSecurityContext,omitempty"`
	VolumeClaimTemplates     *corev1.PersistentVolumeClaimSpec `json:"volumeClaimTemplates,omitempty"`
	ExtraVolumes             []corev1.Volume                   `json:"extraVolumes,omitempty"`
	ExtraVolumeMounts        []corev1.VolumeMount              `json:"extraVolumeMounts,omitempty"`
}

type EMQXServiceTemplate struct {
	Enabled  *bool              `json:"enabled,omitempty"`
	Metadata metav1.ObjectMeta  `json:"metadata,omitempty"`
	Spec     corev1.ServiceSpec `json:"spec,omitempty"`
}

// what the gateway's hooks and emqx/emqx.conf need in the EMQX configuration
var emqxConfig = []string{"/internal/emqx/authn", "/internal/emqx/authz", "no_match = deny", "listeners.wss.default", "bytes_rate"}

func (e *EMQX) check() error {
	if e.Spec.Image == "" {
		return errors.New("spec.image is empty")
	}
	for _, want := range emqxConfig {
		if !strings.Contains(e.Spec.Config.Data, want) {
			return fmt.Errorf("spec.config.data lacks %q", want)
		}
	}
	if r := e.Spec.CoreTemplate.Spec.Replicas; r != nil && *r < 1 {
		return fmt.Errorf("coreTemplate.spec.replicas %d", *r)
	}
	return nil
}
