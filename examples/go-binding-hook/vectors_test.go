// The shared vectors in schemas/vectors/ against contract.go and schema.go: the requests a hook
// must take or refuse, and the replies it builds. Vectors whose code only the gate can produce
// (bad-replyid, hook-mismatch and wrong-type of a reply: they need the gate's key or are about
// the gate's sink) are listed in gateOnly and checked to be exactly those.
//
//	go test ./...        (PRESTART_VECTORS=<dir> points elsewhere)
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
)

type vector struct {
	Description string            `json:"description"`
	Mode        string            `json:"mode"`
	Headers     map[string]string `json:"headers"`
	Body        string            `json:"body"`
	MaxBytes    int               `json:"maxBytes"`
	Expect      struct {
		OK    bool           `json:"ok"`
		Code  string         `json:"code"`
		Reply map[string]any `json:"reply"`
	} `json:"expect"`
}

var gateOnly = map[string]bool{"bad-replyid": true, "hook-mismatch": true, "wrong-type": true}

func vectorsDir() string {
	if dir := os.Getenv("PRESTART_VECTORS"); dir != "" {
		return dir
	}
	return filepath.Join("..", "..", "schemas", "vectors")
}

type named struct {
	name string
	v    vector
}

func load(t *testing.T, kind, verdict string) []named {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(vectorsDir(), kind, verdict, "*.json"))
	if len(files) == 0 {
		t.Fatalf("no vectors in %s", filepath.Join(vectorsDir(), kind, verdict))
	}
	sort.Strings(files)
	out := make([]named, 0, len(files))
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v vector
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, named{filepath.Base(f), v})
	}
	return out
}

func (v vector) header() http.Header {
	h := http.Header{}
	for name, value := range v.Headers {
		h.Add(name, value)
	}
	return h
}

func (v vector) limit() int {
	if v.MaxBytes > 0 {
		return v.MaxBytes
	}
	return MaxReplyBytes
}

func correlation(t *testing.T) map[string]any {
	raw, err := os.ReadFile(filepath.Join(vectorsDir(), "correlation.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	_ = json.Unmarshal(raw, &c)
	return c
}

func startRequest(t *testing.T) *Request {
	return validRequest(t, "start-binary.json")
}

func validRequest(t *testing.T, name string) *Request {
	for _, n := range load(t, "requested", "valid") {
		if n.name == name {
			req, err := ParseRequested(n.v.header(), []byte(n.v.Body))
			if err != nil {
				t.Fatal(err)
			}
			return req
		}
	}
	t.Fatalf("no requested/valid/%s", name)
	return nil
}

func TestTakesValidRequests(t *testing.T) {
	for _, n := range load(t, "requested", "valid") {
		t.Run(n.name, func(t *testing.T) {
			req, err := ParseRequested(n.v.header(), []byte(n.v.Body))
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			wantAction := "start"
			if strings.HasSuffix(req.Event.ID(), "/cancel") {
				wantAction = "cancel"
			}
			got := []any{req.CorrelationID, req.Hook, req.Attempt, req.Subject, req.AttemptKey(), req.Key, req.Action()}
			want := []any{correlation(t)["primary"], "db-migrate", 1, "shop/checkout-00002",
				req.Event.Source() + "#" + correlation(t)["ref"].(map[string]any)["runUID"].(string) + "/db-migrate/1",
				req.Event.Source() + "#" + req.Event.ID(), wantAction}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}

func TestRefusesInvalidRequests(t *testing.T) {
	for _, n := range load(t, "requested", "invalid") {
		t.Run(n.name, func(t *testing.T) {
			_, err := ParseRequested(n.v.header(), []byte(n.v.Body))
			if err == nil || err.Code != n.v.Expect.Code || err.Status < 400 || err.Status >= 500 {
				t.Errorf("got %v, want code %s", err, n.v.Expect.Code)
			}
		})
	}
}

// binary encodes e as the hook POSTs it.
func binary(t *testing.T, e event.Event) (http.Header, []byte) {
	t.Helper()
	req, err := NewBinaryRequest(context.Background(), "http://127.0.0.1/", e)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(req.Body)
	return req.Header, body
}

func TestReplyEchoesTheRequest(t *testing.T) {
	for _, n := range load(t, "requested", "valid") {
		t.Run(n.name, func(t *testing.T) {
			req, _ := ParseRequested(n.v.header(), []byte(n.v.Body))
			reply, err := BuildCompleted(req, CompletedData{Outcome: "succeeded", Message: ptr("done")}, "/prestart-hooks/db-migrate", "", time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			header, body := binary(t, reply)
			// The gate takes the reply's identity from replyid alone: the correlationid, byte for byte.
			got := []string{header.Get("Ce-Replyid"), header.Get("Ce-Prestarthook"), header.Get("Ce-Prestartattempt"),
				header.Get("Ce-Subject"), header.Get("Ce-Type"), header.Get("Content-Type"), string(body)}
			want := []string{req.CorrelationID, "db-migrate", "1", "shop/checkout-00002", CompletedType, JSONContentType,
				`{"outcome":"succeeded","message":"done"}`}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %q, want %q", got, want)
			}
		})
	}
}

func TestBuildsRepliesTheGateAccepts(t *testing.T) {
	for _, n := range load(t, "completed", "valid") {
		t.Run(n.name, func(t *testing.T) {
			shown, err := ParseMessage(n.v.header(), []byte(n.v.Body), n.v.limit())
			if err != nil {
				t.Fatal(err)
			}
			value, err := JSONData(shown)
			if err != nil {
				t.Fatal(err)
			}
			if problem := CheckCompletedData(value); problem != "" {
				t.Fatal(problem)
			}
			data := value.(map[string]any)
			for _, member := range []string{"outcome", "message", "progress", "retryAfter", "contributions"} {
				if !reflect.DeepEqual(data[member], n.v.Expect.Reply[member]) {
					t.Errorf("%s: got %v, want %v", member, data[member], n.v.Expect.Reply[member])
				}
			}

			// Rebuild the vector's reply with this hook's builder, answering the request it names.
			answered := *startRequest(t)
			answered.CorrelationID = shown.Extensions()[ExtReplyID].(string)
			var typed CompletedData
			raw, _ := json.Marshal(data)
			_ = json.Unmarshal(raw, &typed)
			built, buildErr := BuildCompleted(&answered, typed, shown.Source(), shown.ID(), shown.Time())
			if buildErr != nil {
				t.Fatal(buildErr)
			}
			header, body := binary(t, built)
			again, err := ParseMessage(header, body, MaxReplyBytes)
			if err != nil {
				t.Fatal(err)
			}
			if key := again.Source() + "#" + again.ID(); key != n.v.Expect.Reply["eventKey"] {
				t.Errorf("event key %s, want %s", key, n.v.Expect.Reply["eventKey"])
			}
			if again.SpecVersion() != shown.SpecVersion() || again.Type() != shown.Type() ||
				(!shown.Time().IsZero() && !again.Time().Equal(shown.Time())) {
				t.Errorf("attributes differ: %v vs %v", again, shown)
			}
			if shown.Subject() != "" && again.Subject() != shown.Subject() {
				t.Errorf("subject %q, want %q", again.Subject(), shown.Subject())
			}
			for _, ext := range []string{ExtReplyID, ExtHook, ExtAttempt} {
				if want, present := shown.Extensions()[ext]; present && fmt.Sprint(again.Extensions()[ext]) != fmt.Sprint(want) {
					t.Errorf("%s: got %v, want %v", ext, again.Extensions()[ext], want)
				}
			}
			rebuilt, _ := JSONData(again)
			if !reflect.DeepEqual(rebuilt, value) {
				t.Errorf("data %v, want %v", rebuilt, value)
			}
		})
	}
}

func TestRefusesWhatTheGateRefuses(t *testing.T) {
	for _, n := range load(t, "completed", "invalid") {
		if gateOnly[n.v.Expect.Code] {
			continue // counted in TestGateOnlyCodesAreTheOnlyOnesLeftOut
		}
		t.Run(n.name, func(t *testing.T) {
			// The same binding a request goes through, then the reply schema the builder enforces.
			e, err := ParseMessage(n.v.header(), []byte(n.v.Body), n.v.limit())
			var value any
			if err == nil {
				value, err = JSONData(e)
			}
			if err == nil {
				if problem := CheckCompletedData(value); problem != "" {
					err = refuse("invalid-data", "%s", problem)
				}
			}
			if err == nil || err.Code != n.v.Expect.Code {
				t.Errorf("got %v, want code %s", err, n.v.Expect.Code)
			}
		})
	}
}

func TestGateOnlyCodesAreTheOnlyOnesLeftOut(t *testing.T) {
	left := map[string]bool{}
	for _, n := range load(t, "completed", "invalid") {
		if !gateOnly[n.v.Expect.Code] {
			left[n.v.Expect.Code] = true
		}
	}
	want := map[string]bool{"malformed": true, "too-large": true, "unsupported-mode": true, "invalid-data": true}
	if !reflect.DeepEqual(left, want) {
		t.Errorf("codes checked: %v, want %v", left, want)
	}
}

func TestBuilderRefusesDataTheGateWouldRefuse(t *testing.T) {
	data := CompletedData{Outcome: "failed", Contributions: []Contribution{VolumeContribution("db", "db")}}
	_, err := BuildCompleted(startRequest(t), data, "/prestart-hooks/db-migrate", "", time.Time{})
	if err == nil || !strings.Contains(err.Error(), "contributions are only allowed") {
		t.Errorf("got %v", err)
	}
}

func TestRFC3339TimesReadAsInstants(t *testing.T) {
	a, okA := ParseRFC3339("2025-06-01T12:00:00.123456789Z")
	b, okB := ParseRFC3339("2025-06-01T14:00:00.123456789+02:00")
	if !okA || !okB || !a.Equal(b) {
		t.Errorf("%v %v", a, b)
	}
	for _, bad := range []string{"2025-13-01T12:00:00Z", "2025-06-01 12:00:00Z"} {
		if _, ok := ParseRFC3339(bad); ok {
			t.Errorf("%s taken", bad)
		}
	}
}

func TestVersion2NamesWhatWillRun(t *testing.T) {
	req := startRequest(t)
	images, ok := req.ImagesToRun()
	want := []ImageToRun{
		{"user-container", "registry.example/shop/checkout@sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"},
		// Knative does not resolve kind.local: it runs the image as written, and so is it named.
		{"cache-warmer", "kind.local/shop/cache-warmer:dev"},
		{"migrate", "registry.example/shop/migrate@sha256:fcde2b2edba56bf408601fb721fe9b5c338d10ee429ea04fae5511b68fbf8fb9"},
	}
	if req.Version != 2 || !ok || !reflect.DeepEqual(images, want) {
		t.Errorf("version %d, images %v (%v), want 2, %v", req.Version, images, ok, want)
	}
}

func TestVersion1RequestIsTakenWithoutContainers(t *testing.T) {
	req := validRequest(t, "start-v1.json")
	if images, ok := req.ImagesToRun(); req.Version != 1 || ok || images != nil {
		t.Errorf("version %d, images %v (%v), want 1 and none", req.Version, images, ok)
	}
}

func TestReplyNamesTheImagesItActedOn(t *testing.T) {
	work := ProvisionDatabase(0)
	progress := func(int, string) {}
	v2 := work(context.Background(), startRequest(t), progress)
	wantV2 := "; images: user-container=registry.example/shop/checkout@sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae, " +
		"cache-warmer=kind.local/shop/cache-warmer:dev, " +
		"migrate=registry.example/shop/migrate@sha256:fcde2b2edba56bf408601fb721fe9b5c338d10ee429ea04fae5511b68fbf8fb9"
	if !v2.Succeeded || !strings.HasSuffix(v2.Message, wantV2) {
		t.Errorf("got %+v, want a success ending %q", v2, wantV2)
	}
	v1 := work(context.Background(), validRequest(t, "start-v1.json"), progress)
	if !v1.Succeeded || !strings.HasSuffix(v1.Message, "; images: not named (a version 1 request)") {
		t.Errorf("got %+v", v1)
	}
}
