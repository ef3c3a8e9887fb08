// The work itself: "provisions" a database for a new Revision (it only waits, in four steps,
// reporting progress after each) and hands the Revision the Secret with the credentials, as
// environment variables and as a volume mounted at $SERVICE_BINDING_ROOT/db.
//
// Params it reads from its PrestartHook: secretName (default demo-db), fail (true makes the
// second step fail, to see a held Revision), busyAttempts (default 0: attempts up to this one find
// the database quota busy and ask the gate to ask again in busySeconds, default 1).
//
// The reply names the images it would act on (a scanner would scan these): each container's
// digest as the request names it, never a tag, which can move before Knative runs it.
package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

var steps = []string{
	"creating the database",
	"creating the user",
	"storing the credentials in a Secret",
	"waiting for the database to accept connections",
}

// EnvContribution: Secret keys as environment variables; env maps VARIABLE -> key in the Secret.
func EnvContribution(name, secretName string, env map[string]string) Contribution {
	return Contribution{Name: name, SecretName: secretName, As: "env", Env: env}
}

// VolumeContribution: the Secret mounted at $SERVICE_BINDING_ROOT/<name> (servicebinding.io).
func VolumeContribution(name, secretName string) Contribution {
	return Contribution{Name: name, SecretName: secretName, As: "volume"}
}

// AllowedOnly keeps the kinds the PrestartHook allows; the gate would drop the others anyway.
func AllowedOnly(req *Request, contributions []Contribution) []Contribution {
	allowed := req.Data["contributions"].(map[string]any)["allowed"].([]any)
	return slices.DeleteFunc(contributions, func(c Contribution) bool { return !slices.Contains(allowed, any(c.As)) })
}

// ImagesLine is "images: name=reference, ..." from revision.containers; a version 1 request does not say.
func ImagesLine(req *Request) string {
	images, ok := req.ImagesToRun()
	if !ok {
		return "images: not named (a version 1 request)"
	}
	if len(images) == 0 {
		return "images: none"
	}
	parts := make([]string, len(images))
	for i, image := range images {
		parts[i] = image.Name + "=" + image.Ref
	}
	return "images: " + strings.Join(parts, ", ")
}

func ProvisionDatabase(duration time.Duration) Work {
	return func(ctx context.Context, req *Request, progress Progress) Outcome {
		params := req.Params()
		secretName, present := params["secretName"]
		if !present {
			secretName = "demo-db"
		}
		if !IsDNSSubdomain(secretName) {
			return Outcome{Message: fmt.Sprintf("params.secretName must be a Secret name (a DNS-1123 subdomain), got %#v", secretName)}
		}
		revision := req.Data["revision"].(map[string]any)
		database, _ := revision["service"].(string)
		if database == "" {
			database = revision["name"].(string)
		}
		// Attempts up to busyAttempts find the quota busy: not an error, so ask to be asked again.
		if busy, _ := params["busyAttempts"].(float64); float64(req.Attempt) <= busy {
			seconds, _ := params["busySeconds"].(float64)
			return Outcome{Message: fmt.Sprintf("%s: database quota busy (attempt %d)", database, req.Attempt), RetryAfter: max(1, int(seconds))}
		}
		for i, step := range steps {
			progress(i*100/len(steps), fmt.Sprintf("%s: %s", database, step))
			select {
			case <-ctx.Done():
				// Cancelled by the gate, or the deadline passed: nothing is sent.
				return Outcome{}
			case <-time.After(duration / time.Duration(len(steps))):
			}
			if params["fail"] == true && i == 1 {
				return Outcome{Message: fmt.Sprintf(`%s: the database server refused to create user "app"`, database)}
			}
		}
		return Outcome{
			Succeeded: true,
			Message:   fmt.Sprintf("database %s ready; credentials in Secret %s; %s", database, secretName, ImagesLine(req)),
			Contributions: AllowedOnly(req, []Contribution{
				EnvContribution("db-env", secretName.(string), map[string]string{"DATABASE_URL": "uri", "DATABASE_PASSWORD": "password"}),
				VolumeContribution("db", secretName.(string)),
			}),
		}
	}
}
