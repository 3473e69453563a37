// Command validate reads rendered Kubernetes manifests (the output of
// `helm template`) on stdin and decodes every document strictly into its
// Kubernetes API type: an unknown or misspelt field, a duplicate key, a bad
// quantity or a wrong value type is an error, as the API server would refuse it.
// It also checks what the API server would check across objects: names and
// labels are valid, a Deployment's selector matches its pod template, an HPA,
// a PodDisruptionBudget, a Service or a KEDA ScaledObject points at something
// that is rendered. Custom resources (KEDA ScaledObject, EMQX) are decoded
// into the fields this chart uses, also strictly.
//
// Usage: helm template ... | validate   (prints one line per object; exit 1 on any error)
package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// kinds maps "apiVersion/Kind" to a new value of its API type.
var kinds = map[string]func() any{
	"v1/ConfigMap":                           func() any { return &corev1.ConfigMap{} },
	"v1/Secret":                              func() any { return &corev1.Secret{} },
	"v1/Service":                             func() any { return &corev1.Service{} },
	"v1/ServiceAccount":                      func() any { return &corev1.ServiceAccount{} },
	"v1/PersistentVolumeClaim":               func() any { return &corev1.PersistentVolumeClaim{} },
	"apps/v1/Deployment":                     func() any { return &appsv1.Deployment{} },
	"apps/v1/StatefulSet":                    func() any { return &appsv1.StatefulSet{} },
	"batch/v1/Job":                           func() any { return &batchv1.Job{} },
	"autoscaling/v2/HorizontalPodAutoscaler": func() any { return &autoscalingv2.HorizontalPodAutoscaler{} },
	"policy/v1/PodDisruptionBudget":          func() any { return &policyv1.PodDisruptionBudget{} },
	"networking.k8s.io/v1/NetworkPolicy":     func() any { return &networkingv1.NetworkPolicy{} },
	"keda.sh/v1alpha1/ScaledObject":          func() any { return &ScaledObject{} },
	"apps.emqx.io/v2beta1/EMQX":              func() any { return &EMQX{} },
}

type header struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
}

type rendered struct {
	key  string // apiVersion/Kind
	name string
	obj  any
}

func main() {
	data, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "validate: reading stdin:", err)
		os.Exit(2)
	}
	objects, documents, problems := decodeAll(data)
	problems = append(problems, crossCheck(objects)...)
	for _, o := range objects {
		fmt.Printf("ok %s %s\n", o.key, o.name)
	}
	if documents == 0 {
		problems = append(problems, "no manifest on stdin")
	}
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, "invalid:", p)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
}

func decodeAll(data []byte) ([]rendered, int, []string) {
	var objects []rendered
	documents := 0
	var problems []string
	reader := k8syaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for n := 1; ; n++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("document %d: %v", n, err))
			break
		}
		if isEmpty(doc) {
			continue
		}
		documents++
		o, err := decode(doc)
		if err != nil {
			problems = append(problems, fmt.Sprintf("document %d: %v", n, err))
			continue
		}
		objects = append(objects, o)
	}
	return objects, documents, problems
}

func isEmpty(doc []byte) bool {
	for _, line := range strings.Split(string(doc), "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") && line != "---" {
			return false
		}
	}
	return true
}

func decode(doc []byte) (rendered, error) {
	var h header
	if err := yaml.Unmarshal(doc, &h); err != nil {
		return rendered{}, err
	}
	key := h.APIVersion + "/" + h.Kind
	make, known := kinds[key]
	if !known {
		return rendered{}, fmt.Errorf("%s %q: not a kind this chart may render", key, h.Metadata.Name)
	}
	where := fmt.Sprintf("%s %q", key, h.Metadata.Name)
	obj := make()
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return rendered{}, fmt.Errorf("%s: %v", where, err)
	}
	if msgs := validation.IsDNS1123Subdomain(h.Metadata.Name); len(msgs) > 0 {
		return rendered{}, fmt.Errorf("%s: name: %s", where, strings.Join(msgs, "; "))
	}
	for k, v := range h.Metadata.Labels {
		if msgs := append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...); len(msgs) > 0 {
			return rendered{}, fmt.Errorf("%s: label %s=%s: %s", where, k, v, strings.Join(msgs, "; "))
		}
	}
	if err := checkObject(obj); err != nil {
		return rendered{}, fmt.Errorf("%s: %v", where, err)
	}
	return rendered{key: key, name: h.Metadata.Name, obj: obj}, nil
}

// checkObject: what the API server validates within one object.
func checkObject(obj any) error {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return checkPods(o.Spec.Selector, o.Spec.Template)
	case *appsv1.StatefulSet:
		return checkPods(o.Spec.Selector, o.Spec.Template)
	case *batchv1.Job:
		return checkContainers(o.Spec.Template.Spec)
	case *corev1.Service:
		if len(o.Spec.Ports) == 0 {
			return errors.New("a Service without ports")
		}
		if msgs := validation.IsDNS1035Label(o.Name); len(msgs) > 0 {
			return fmt.Errorf("service name: %s", strings.Join(msgs, "; "))
		}
	case *ScaledObject:
		return o.check()
	case *EMQX:
		return o.check()
	}
	return nil
}

func checkPods(selector *metav1.LabelSelector, template corev1.PodTemplateSpec) error {
	if selector == nil {
		return errors.New("no selector")
	}
	chosen, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return fmt.Errorf("selector: %v", err)
	}
	if chosen.Empty() || !chosen.Matches(labels.Set(template.Labels)) {
		return fmt.Errorf("selector %s does not match the pod template's labels %v", chosen, template.Labels)
	}
	return checkContainers(template.Spec)
}

func checkContainers(pod corev1.PodSpec) error {
	if len(pod.Containers) == 0 {
		return errors.New("a pod without containers")
	}
	mounts := map[string]bool{}
	for _, v := range pod.Volumes {
		mounts[v.Name] = true
	}
	for _, c := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
		if c.Name == "" || c.Image == "" {
			return fmt.Errorf("container %q without a name or an image", c.Name)
		}
		for _, m := range c.VolumeMounts {
			if !mounts[m.Name] {
				return fmt.Errorf("container %q mounts volume %q, which the pod does not have", c.Name, m.Name)
			}
		}
		ports := map[string]bool{}
		for _, p := range c.Ports {
			ports[p.Name] = true
		}
		for what, probe := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe, "startup": c.StartupProbe} {
			if probe != nil && probe.HTTPGet != nil && probe.HTTPGet.Port.StrVal != "" && !ports[probe.HTTPGet.Port.StrVal] {
				return fmt.Errorf("container %q: %s probe on port %q, which it does not name", c.Name, what, probe.HTTPGet.Port.StrVal)
			}
		}
	}
	return nil
}

// crossCheck: references between the rendered objects resolve.
func crossCheck(objects []rendered) []string {
	var problems []string
	deployments := map[string]*appsv1.Deployment{}
	templates := map[string]labels.Set{}
	for _, o := range objects {
		switch d := o.obj.(type) {
		case *appsv1.Deployment:
			deployments[d.Name] = d
			templates[d.Name] = labels.Set(d.Spec.Template.Labels)
		case *appsv1.StatefulSet:
			templates[d.Name] = labels.Set(d.Spec.Template.Labels)
		}
	}
	selects := func(selector labels.Selector) bool {
		for _, set := range templates {
			if selector.Matches(set) {
				return true
			}
		}
		return false
	}
	for _, o := range objects {
		where := fmt.Sprintf("%s %q", o.key, o.name)
		switch x := o.obj.(type) {
		case *autoscalingv2.HorizontalPodAutoscaler:
			if x.Spec.ScaleTargetRef.Kind != "Deployment" || deployments[x.Spec.ScaleTargetRef.Name] == nil {
				problems = append(problems, where+": scales "+x.Spec.ScaleTargetRef.Name+", which is not a rendered Deployment")
			}
		case *ScaledObject:
			if deployments[x.Spec.ScaleTargetRef.Name] == nil {
				problems = append(problems, where+": scales "+x.Spec.ScaleTargetRef.Name+", which is not a rendered Deployment")
			}
		case *policyv1.PodDisruptionBudget:
			selector, err := metav1.LabelSelectorAsSelector(x.Spec.Selector)
			if err != nil || selector.Empty() || !selects(selector) {
				problems = append(problems, where+": its selector matches no rendered pod")
			}
		case *corev1.Service:
			if len(x.Spec.Selector) > 0 && !selects(labels.SelectorFromSet(x.Spec.Selector)) {
				problems = append(problems, where+": its selector matches no rendered pod")
			}
		case *networkingv1.NetworkPolicy:
			selector, err := metav1.LabelSelectorAsSelector(&x.Spec.PodSelector)
			if err != nil || (!selector.Empty() && !selects(selector)) {
				problems = append(problems, where+": its pod selector matches no rendered pod")
			}
		}
	}
	return problems
}
