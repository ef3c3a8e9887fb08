// The CEL cost of the stamp policies per evaluation, as the apiserver's own admission code counts
// it. The apiserver neither estimates the cost of a policy's expressions when it is written nor
// reports what an evaluation cost, so this program compiles the policies with k8s.io/apiserver
// (the version kube-apiserver is built from here) as its ValidatingAdmissionPolicy and
// MutatingAdmissionPolicy plugins do, and evaluates them through the same entry points (ForInput,
// one runtime budget per evaluation): the cost it prints is the one the apiserver charges against
// celconfig.PerCallLimit (each expression) and celconfig.RuntimeCELCostBudget (each evaluation,
// that is one policy for one parameter). bench/stamp-admission.ts builds it in a copy of the
// Kubernetes build module (the same dependency versions) and feeds it JSON on stdin:
//
//	{"policies": [<policy object>...], "cases": [{"label", "object", "namespace", "params": [<hook>...]}]}
//
// It writes one JSON line per case and policy: the cost and wall time of each evaluation (one per
// parameter, or one for a policy without parameters) and the errors the apiserver would turn into
// a refusal (both policies fail closed).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	regv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
)

var (
	revisions   = schema.GroupVersionResource{Group: "serving.knative.dev", Version: "v1", Resource: "revisions"}
	revisionGVK = schema.GroupVersionKind{Group: "serving.knative.dev", Version: "v1", Kind: "Revision"}
)

type input struct {
	Policies []json.RawMessage `json:"policies"`
	Cases    []struct {
		Label     string           `json:"label"`
		Object    map[string]any   `json:"object"`
		Namespace corev1.Namespace `json:"namespace"`
		Params    []map[string]any `json:"params"`
	} `json:"cases"`
}

type output struct {
	Case   string  `json:"case"`
	Policy string  `json:"policy"`
	Costs  []int64 `json:"costs"`
	// Wall time of each evaluation, milliseconds.
	Millis []float64 `json:"ms"`
	Errors []string  `json:"errors,omitempty"`
}

// step evaluates some of a policy's expressions within the budget left; returns what is left.
type step func(ctx context.Context, in evalInput, budget int64) (int64, error)

type evalInput struct {
	attr *admission.VersionedAttributes
	req  *admissionv1.AdmissionRequest
	vars plugincel.OptionalVariableBindings
	ns   *corev1.Namespace
}

// compiled is one policy as a plugin compiles it: its variables, matchConditions and steps.
type compiled struct {
	name     string
	hasParam bool
	compiler *plugincel.CompositedCompiler
	match    plugincel.ConditionEvaluator
	steps    []step
}

func compiler() *plugincel.CompositedCompiler {
	c, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		panic(err)
	}
	return c
}

func variables(vs []regv1.Variable) []plugincel.NamedExpressionAccessor {
	out := make([]plugincel.NamedExpressionAccessor, len(vs))
	for i, v := range vs {
		out[i] = &validating.Variable{Name: v.Name, Expression: v.Expression}
	}
	return out
}

func matcher(c *plugincel.CompositedCompiler, mcs []regv1.MatchCondition, opts plugincel.OptionalVariableDeclarations) plugincel.ConditionEvaluator {
	if len(mcs) == 0 {
		return nil
	}
	accessors := make([]plugincel.ExpressionAccessor, len(mcs))
	for i := range mcs {
		accessors[i] = (*matchconditions.MatchCondition)(&mcs[i])
	}
	return c.CompileCondition(accessors, opts, environment.StoredExpressions)
}

// conditions runs a compiled list of conditions; an evaluation error ends the evaluation.
func conditions(e plugincel.ConditionEvaluator) step {
	return func(ctx context.Context, in evalInput, budget int64) (int64, error) {
		results, left, err := e.ForInput(ctx, in.attr, in.req, in.vars, in.ns, budget)
		if err != nil {
			return left, err
		}
		for _, r := range results {
			if r.Error != nil {
				return left, r.Error
			}
		}
		return left, nil
	}
}

// As validating/plugin.go compilePolicy: validations, then message expressions (without the authorizer).
func validatingPolicy(p *regv1.ValidatingAdmissionPolicy) compiled {
	hasParam := p.Spec.ParamKind != nil
	opts := plugincel.OptionalVariableDeclarations{HasParams: hasParam, HasAuthorizer: true}
	c := compiler()
	c.CompileAndStoreVariables(variables(p.Spec.Variables), opts, environment.StoredExpressions)
	validations := make([]plugincel.ExpressionAccessor, len(p.Spec.Validations))
	messages := make([]plugincel.ExpressionAccessor, len(p.Spec.Validations))
	for i, v := range p.Spec.Validations {
		validations[i] = &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}
		if v.MessageExpression != "" {
			messages[i] = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
		}
	}
	msgOpts := plugincel.OptionalVariableDeclarations{HasParams: hasParam}
	return compiled{
		name:     "ValidatingAdmissionPolicy/" + p.Name,
		hasParam: hasParam,
		compiler: c,
		match:    matcher(c, p.Spec.MatchConditions, opts),
		steps: []step{
			conditions(c.CompileCondition(validations, opts, environment.StoredExpressions)),
			conditions(c.CompileCondition(messages, msgOpts, environment.StoredExpressions)),
		},
	}
}

// As mutating/compilation.go compilePolicy: each JSONPatch mutation in order.
func mutatingPolicy(p *regv1.MutatingAdmissionPolicy) compiled {
	hasParam := p.Spec.ParamKind != nil
	opts := plugincel.OptionalVariableDeclarations{HasParams: hasParam, HasAuthorizer: true}
	c := compiler()
	c.CompileAndStoreVariables(variables(p.Spec.Variables), opts, environment.StoredExpressions)
	patchOpts := opts
	patchOpts.HasPatchTypes = true
	var steps []step
	for _, m := range p.Spec.Mutations {
		if m.JSONPatch == nil {
			panic(fmt.Sprintf("%s: only JSONPatch mutations are measured", p.Name))
		}
		e := c.CompileMutatingEvaluator(&patch.JSONPatchCondition{Expression: m.JSONPatch.Expression}, patchOpts, environment.StoredExpressions)
		steps = append(steps, func(ctx context.Context, in evalInput, budget int64) (int64, error) {
			r, left, err := e.ForInput(ctx, in.attr, in.req, in.vars, in.ns, budget)
			if err == nil && r.Error != nil {
				err = r.Error
			}
			return left, err
		})
	}
	return compiled{name: "MutatingAdmissionPolicy/" + p.Name, hasParam: hasParam, compiler: c, match: matcher(c, p.Spec.MatchConditions, opts), steps: steps}
}

// evaluate is one evaluation (one parameter): matchConditions on their own budget, then the steps
// on one RuntimeCELCostBudget, as the plugins charge them. Returns the cost of both.
func (p compiled) evaluate(in evalInput) (int64, error) {
	ctx := p.compiler.CreateContext(context.Background())
	var cost int64
	if p.match != nil {
		results, left, err := p.match.ForInput(ctx, in.attr, in.req, in.vars, in.ns, celconfig.RuntimeCELCostBudgetMatchConditions)
		cost += celconfig.RuntimeCELCostBudgetMatchConditions - max(left, 0)
		if err != nil {
			return cost, err
		}
		for _, r := range results {
			if r.Error != nil {
				return cost, r.Error
			}
			if r.EvalResult != nil && r.EvalResult.Value() == false {
				return cost, nil
			}
		}
	}
	budget := int64(celconfig.RuntimeCELCostBudget)
	for _, s := range p.steps {
		left, err := s(ctx, in, budget)
		if left < 0 {
			return cost + budget, err
		}
		cost += budget - left
		budget = left
		if err != nil {
			return cost, err
		}
	}
	return cost, nil
}

func parsePolicy(raw json.RawMessage) compiled {
	var meta metav1.TypeMeta
	must(json.Unmarshal(raw, &meta))
	switch meta.Kind {
	case "ValidatingAdmissionPolicy":
		var p regv1.ValidatingAdmissionPolicy
		must(json.Unmarshal(raw, &p))
		return validatingPolicy(&p)
	case "MutatingAdmissionPolicy":
		var p regv1.MutatingAdmissionPolicy
		must(json.Unmarshal(raw, &p))
		return mutatingPolicy(&p)
	}
	panic("not a policy: " + meta.Kind)
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func main() {
	var in input
	must(json.NewDecoder(os.Stdin).Decode(&in))
	policies := make([]compiled, len(in.Policies))
	for i, raw := range in.Policies {
		policies[i] = parsePolicy(raw)
	}
	out := json.NewEncoder(os.Stdout)
	for _, c := range in.Cases {
		object := &unstructured.Unstructured{Object: c.Object}
		ns := c.Namespace
		attrs := admission.NewAttributesRecord(object, nil, revisionGVK, ns.Name, object.GetName(), revisions, "", admission.Create,
			&metav1.CreateOptions{}, false, &user.DefaultInfo{Name: "system:serviceaccount:knative-serving:controller"})
		attr := &admission.VersionedAttributes{Attributes: attrs, VersionedKind: revisionGVK, VersionedObject: object}
		req := plugincel.CreateAdmissionRequest(attrs, metav1.GroupVersionResource(revisions), metav1.GroupVersionKind(revisionGVK))
		for _, p := range policies {
			result := output{Case: c.Label, Policy: p.name, Costs: []int64{}, Millis: []float64{}}
			params := []*unstructured.Unstructured{nil}
			if p.hasParam {
				params = params[:0]
				for _, h := range c.Params {
					params = append(params, &unstructured.Unstructured{Object: h})
				}
			}
			for _, param := range params {
				vars := plugincel.OptionalVariableBindings{}
				if param != nil {
					vars.VersionedParams = param
				}
				started := time.Now()
				cost, err := p.evaluate(evalInput{attr: attr, req: req, vars: vars, ns: &ns})
				result.Millis = append(result.Millis, float64(time.Since(started).Microseconds())/1000)
				result.Costs = append(result.Costs, cost)
				if err != nil {
					result.Errors = append(result.Errors, err.Error())
				}
			}
			must(out.Encode(result))
		}
	}
}
