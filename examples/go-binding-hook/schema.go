// The data schemas (schemas/*.data.schema.json), written out: each check returns "" or the
// first violation, in words. Values are what encoding/json makes of JSON (map[string]any,
// []any, float64, string, bool).
package main

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"unicode/utf8"
)

var (
	dnsLabel     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	envName      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	secretKey    = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)
	uriPattern   = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.\-]*:[^\s]*$`)
	kinds        = map[string]bool{"env": true, "envFrom": true, "volume": true}

	// An OCI digest reference, name@algorithm:encoded; sha256 has exactly 64 lowercase hex digits.
	digestRef = regexp.MustCompile(`^[^@\s]+@[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$`)
	sha256Ref = regexp.MustCompile(`@sha256:[a-f0-9]{64}$`)
)

func IsDNSLabel(v any) bool {
	s, ok := v.(string)
	return ok && len(s) <= 63 && dnsLabel.MatchString(s)
}

func IsDNSSubdomain(v any) bool {
	s, ok := v.(string)
	return ok && len(s) <= 253 && dnsSubdomain.MatchString(s)
}

// IsHookName: a PrestartHook's name, or <namespace>/<name> for a NamespacedPrestartHook.
func IsHookName(v any) bool {
	s, ok := v.(string)
	if !ok {
		return false
	}
	if ns, name, found := strings.Cut(s, "/"); found {
		return len(ns) <= 63 && dnsLabel.MatchString(ns) && IsDNSSubdomain(name)
	}
	return IsDNSSubdomain(s)
}

func isInteger(v any) bool {
	f, ok := v.(float64)
	return ok && !math.IsInf(f, 0) && f == math.Trunc(f)
}

func stringOfLength(v any, min, max int) bool {
	s, ok := v.(string)
	n := utf8.RuneCountInString(s)
	return ok && n >= min && n <= max
}

func missing(object map[string]any, path string, members ...string) string {
	for _, m := range members {
		if _, present := object[m]; !present {
			return fmt.Sprintf("%s is missing %q", path, m)
		}
	}
	return ""
}

// CheckRequestedData checks data against requested.data.schema.json; version 1 (a request
// without dataschema, from an older gate) leaves out the rule that a start names its containers.
func CheckRequestedData(v any, version int) string {
	data, ok := v.(map[string]any)
	if !ok {
		return "data must be an object"
	}
	if problem := missing(data, "data", "action", "revision", "hook", "attempt", "contributions"); problem != "" {
		return problem
	}
	action := data["action"]
	if action != "start" && action != "cancel" {
		return `data/action must be one of "start", "cancel"`
	}
	if reason, present := data["reason"]; present && !stringOfLength(reason, 1, 1024) {
		return "data/reason must be a string of 1 to 1024 characters"
	}
	if problem := revisionProblem(data["revision"]); problem != "" {
		return problem
	}
	hook, ok := data["hook"].(map[string]any)
	if !ok {
		return "data/hook must be an object"
	}
	if problem := missing(hook, "data/hook", "name", "params"); problem != "" {
		return problem
	}
	if !IsHookName(hook["name"]) {
		return "data/hook/name must be a DNS-1123 subdomain, or <namespace>/<name>"
	}
	if _, ok := hook["params"].(map[string]any); !ok {
		return "data/hook/params must be an object"
	}
	if attempt, _ := data["attempt"].(float64); !isInteger(data["attempt"]) || attempt < 1 {
		return "data/attempt must be an integer >= 1"
	}
	if deadline, present := data["deadline"]; present {
		text, _ := deadline.(string)
		if _, ok := ParseRFC3339(text); !ok {
			return "data/deadline must be an RFC 3339 date-time"
		}
	}
	if replyTo, present := data["replyTo"]; present {
		text, ok := replyTo.(string)
		if !ok || !uriPattern.MatchString(text) {
			return "data/replyTo must be a URI"
		}
	}
	contributions, ok := data["contributions"].(map[string]any)
	if !ok {
		return "data/contributions must be an object"
	}
	if problem := missing(contributions, "data/contributions", "allowed"); problem != "" {
		return problem
	}
	allowed, ok := contributions["allowed"].([]any)
	seen := map[any]bool{}
	for _, kind := range allowed {
		name, isString := kind.(string)
		if !isString || !kinds[name] {
			ok = false
		} else if seen[name] {
			return "data/contributions/allowed must not repeat a kind"
		}
		seen[kind] = true
	}
	if !ok {
		return `data/contributions/allowed must be a list of "env", "envFrom", "volume"`
	}
	if _, present := data["reason"]; action == "cancel" && !present {
		return `data: action "cancel" needs a reason`
	}
	if _, present := data["deadline"]; action == "start" && !present {
		return `data: action "start" needs a deadline`
	}
	if _, present := data["revision"].(map[string]any)["containers"]; version >= 2 && action == "start" && !present {
		return `data/revision: action "start" needs containers (protocol version 2: each container with the digest Knative resolved)`
	}
	return ""
}

func revisionProblem(v any) string {
	revision, ok := v.(map[string]any)
	if !ok {
		return "data/revision must be an object"
	}
	if problem := missing(revision, "data/revision", "namespace", "name", "uid", "labels", "annotations", "images"); problem != "" {
		return problem
	}
	if !IsDNSLabel(revision["namespace"]) {
		return "data/revision/namespace must be a DNS-1123 label"
	}
	for _, member := range []string{"name", "service", "configuration"} {
		if value, present := revision[member]; present && !IsDNSSubdomain(value) {
			return fmt.Sprintf("data/revision/%s must be a DNS-1123 subdomain", member)
		}
	}
	if !stringOfLength(revision["uid"], 1, 128) {
		return "data/revision/uid must be a string of 1 to 128 characters"
	}
	for _, member := range []string{"labels", "annotations"} {
		object, ok := revision[member].(map[string]any)
		if !ok {
			return fmt.Sprintf("data/revision/%s must be an object", member)
		}
		for key, value := range object {
			if _, ok := value.(string); !ok {
				return fmt.Sprintf("data/revision/%s/%s must be a string", member, key)
			}
		}
	}
	images, ok := revision["images"].([]any)
	if !ok {
		return "data/revision/images must be a list of non-empty strings"
	}
	for _, image := range images {
		if !stringOfLength(image, 1, math.MaxInt) {
			return "data/revision/images must be a list of non-empty strings"
		}
	}
	value, present := revision["containers"]
	if !present {
		return ""
	}
	containers, ok := value.([]any)
	if !ok {
		return "data/revision/containers must be a list"
	}
	for i, c := range containers {
		if problem := containerProblem(c, fmt.Sprintf("data/revision/containers/%d", i)); problem != "" {
			return problem
		}
	}
	return ""
}

// Unknown members of a container are allowed: a newer gate may add some.
func containerProblem(v any, path string) string {
	c, ok := v.(map[string]any)
	if !ok {
		return path + " must be an object"
	}
	if problem := missing(c, path, "name", "image"); problem != "" {
		return problem
	}
	if !IsDNSLabel(c["name"]) {
		return path + "/name must be a DNS-1123 label"
	}
	if !stringOfLength(c["image"], 1, 4096) {
		return path + "/image must be a string of 1 to 4096 characters"
	}
	if value, present := c["digest"]; present {
		digest, ok := value.(string)
		if !ok || len(digest) > 4096 || !digestRef.MatchString(digest) || (strings.Contains(digest, "@sha256:") && !sha256Ref.MatchString(digest)) {
			return path + "/digest must be a digest reference (repository@sha256:<64 hex digits>)"
		}
	}
	if value, present := c["init"]; present {
		if _, ok := value.(bool); !ok {
			return path + "/init must be a boolean"
		}
	}
	return ""
}

// CheckCompletedData checks data against completed.data.schema.json.
func CheckCompletedData(v any) string {
	data, ok := v.(map[string]any)
	if !ok {
		return "data must be an object"
	}
	for member := range data {
		switch member {
		case "outcome", "message", "details", "progress", "retryAfter", "contributions":
		default:
			return fmt.Sprintf("data has an unknown member %q", member)
		}
	}
	if problem := missing(data, "data", "outcome"); problem != "" {
		return problem
	}
	outcome := data["outcome"]
	if outcome != "succeeded" && outcome != "failed" && outcome != "progress" && outcome != "retry" {
		return `data/outcome must be one of "succeeded", "failed", "progress", "retry"`
	}
	if message, present := data["message"]; present && !stringOfLength(message, 0, MaxMessage) {
		return fmt.Sprintf("data/message must be a string of at most %d characters", MaxMessage)
	}
	// retry (ask me again in retryAfter seconds): the delay and a reason are required, and only there.
	retryAfter, hasRetryAfter := data["retryAfter"]
	if outcome == "retry" {
		if !hasRetryAfter || !stringOfLength(data["message"], 1, MaxMessage) {
			return `data: outcome "retry" needs retryAfter (seconds until the gate asks again, 1 to 86400) and a message (the reason)`
		}
		if seconds, _ := retryAfter.(float64); !isInteger(retryAfter) || seconds < 1 || seconds > 86400 {
			return "data/retryAfter must be an integer from 1 to 86400"
		}
	} else if hasRetryAfter {
		return `data/retryAfter is only allowed with outcome "retry"`
	}
	// details (optional, added compatibly): one line, no control characters, 1 to 1024 characters.
	if details, present := data["details"]; present {
		text, isText := details.(string)
		if !isText || !stringOfLength(details, 1, MaxDetails) || strings.IndexFunc(text, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
			return fmt.Sprintf("data/details must be one line of 1 to %d characters", MaxDetails)
		}
	}
	if progress, present := data["progress"]; present {
		if p, _ := progress.(float64); !isInteger(progress) || p < 0 || p > 100 {
			return "data/progress must be an integer from 0 to 100"
		}
	}
	value, present := data["contributions"]
	if !present {
		return ""
	}
	contributions, ok := value.([]any)
	if !ok {
		return "data/contributions must be a list"
	}
	if len(contributions) > 32 {
		return "data/contributions must have at most 32 items"
	}
	for i, c := range contributions {
		if problem := contributionProblem(c, fmt.Sprintf("data/contributions/%d", i)); problem != "" {
			return problem
		}
	}
	if outcome != "succeeded" && len(contributions) > 0 {
		return `data/contributions: contributions are only allowed with outcome "succeeded"`
	}
	return ""
}

func contributionProblem(v any, path string) string {
	c, ok := v.(map[string]any)
	if !ok {
		return path + " must be an object"
	}
	for member := range c {
		switch member {
		case "name", "secretName", "as", "env":
		default:
			return fmt.Sprintf("%s has an unknown member %q", path, member)
		}
	}
	if problem := missing(c, path, "name", "secretName", "as"); problem != "" {
		return problem
	}
	if !IsDNSLabel(c["name"]) {
		return path + "/name must be a DNS-1123 label"
	}
	if !IsDNSSubdomain(c["secretName"]) {
		return path + "/secretName must be a DNS-1123 subdomain"
	}
	as, _ := c["as"].(string)
	if !kinds[as] {
		return path + `/as must be one of "env", "envFrom", "volume"`
	}
	value, hasEnv := c["env"]
	if as != "env" {
		if hasEnv {
			return path + `: env is only allowed when as is "env"`
		}
		return ""
	}
	if !hasEnv {
		return path + `: a contribution with as "env" needs an env map {VARIABLE: secretKey}`
	}
	env, ok := value.(map[string]any)
	if !ok || len(env) < 1 || len(env) > 64 {
		return path + "/env must be an object with 1 to 64 members"
	}
	for variable, key := range env {
		if len(variable) > 256 || !envName.MatchString(variable) {
			return fmt.Sprintf("%s/env (key %q) must be an environment variable name", path, variable)
		}
		text, ok := key.(string)
		if !ok || len(text) > 253 || !secretKey.MatchString(text) {
			return fmt.Sprintf("%s/env/%s must be a Secret key", path, variable)
		}
	}
	return ""
}
