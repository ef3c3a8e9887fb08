// The prestart CloudEvents contract, hook side: read a revision.prestart.requested, build a
// revision.prestart.completed. docs/protocol.md is the reference and schemas/vectors/ the tests
// (vectors_test.go runs them against this file).
//
// Decoding and encoding go through the CloudEvents SDK. Before the SDK sees a message, the raw
// attributes are checked here: the SDK would take specversion 0.3, and it neither decodes nor
// encodes percent-encoded header values, which the HTTP binding requires.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/google/uuid"
)

const (
	RequestedType         = "revision.prestart.requested"
	CompletedType         = "revision.prestart.completed"
	SpecVersion           = "1.0"
	JSONContentType       = "application/json"
	StructuredContentType = "application/cloudevents+json"
	BatchContentType      = "application/cloudevents-batch+json"

	ExtHook          = "prestarthook"
	ExtAttempt       = "prestartattempt"
	ExtCorrelationID = "correlationid"
	ExtReplyID       = "replyid"

	MaxRequestBytes        = 1024 * 1024
	MaxReplyBytes          = 64 * 1024
	MaxCorrelationIDLength = 1024
	MaxMessage             = 4096
	MaxDetails             = 1024
)

// ContractError is why a message was refused; Status is the HTTP answer (every one is permanent).
type ContractError struct {
	Reason string `json:"error"`
	Code   string `json:"code"`
	Status int    `json:"-"`
}

func (e *ContractError) Error() string { return e.Code + ": " + e.Reason }

var statusOf = map[string]int{
	"malformed":        400,
	"too-large":        413,
	"unsupported-mode": 415,
	"wrong-type":       400,
	"invalid-data":     422,
	"bad-replyid":      403,
	"hook-mismatch":    422,
}

func refuse(code, format string, args ...any) *ContractError {
	return &ContractError{Code: code, Reason: fmt.Sprintf(format, args...), Status: statusOf[code]}
}

var (
	attributeName = regexp.MustCompile(`^[a-z0-9]{1,64}$`)
	rfc3339       = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$`)
	core          = map[string]bool{"specversion": true, "id": true, "source": true, "type": true, "subject": true, "time": true, "datacontenttype": true, "dataschema": true}
)

func mediaType(contentType string) string {
	media, _, _ := strings.Cut(contentType, ";")
	return strings.ToLower(strings.TrimSpace(media))
}

func isJSON(contentType string) bool {
	media := mediaType(contentType)
	return media == JSONContentType || media == "text/json" || strings.HasSuffix(media, "+json")
}

// ParseRFC3339 reads an RFC 3339 timestamp; ok is false for anything else.
func ParseRFC3339(text string) (time.Time, bool) {
	if !rfc3339.MatchString(text) {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, strings.ToUpper(text))
	return t, err == nil
}

func coreProblem(attributes map[string]any) string {
	specversion, present := attributes["specversion"]
	if !present {
		return "missing required attribute specversion"
	}
	if specversion != SpecVersion {
		shown, _ := json.Marshal(specversion)
		return fmt.Sprintf("unsupported specversion %s: only %s is accepted", shown, SpecVersion)
	}
	for _, name := range []string{"id", "source", "type"} {
		value, present := attributes[name]
		if !present {
			return "missing required attribute " + name
		}
		if s, ok := value.(string); !ok || s == "" {
			return fmt.Sprintf("attribute %s must be a non-empty string", name)
		}
	}
	for _, name := range []string{"subject", "datacontenttype", "dataschema"} {
		if value, present := attributes[name]; present {
			if _, ok := value.(string); !ok {
				return fmt.Sprintf("attribute %s must be a string", name)
			}
		}
	}
	if value, present := attributes["time"]; present {
		s, ok := value.(string)
		if _, valid := ParseRFC3339(s); !ok || !valid {
			shown, _ := json.Marshal(value)
			return fmt.Sprintf("attribute time must be an RFC 3339 timestamp, got %s", shown)
		}
	}
	return ""
}

// ParseMessage reads one CloudEvent from an HTTP message in binary or structured mode.
func ParseMessage(header http.Header, body []byte, maxBytes int) (*event.Event, *ContractError) {
	if len(body) > maxBytes {
		return nil, refuse("too-large", "body of %d bytes is larger than the limit of %d bytes", len(body), maxBytes)
	}
	for name, values := range header {
		for _, v := range values[1:] {
			if v != values[0] {
				return nil, refuse("malformed", "the header %s appears twice with different values", name)
			}
		}
	}
	contentType := header.Get("Content-Type")
	media := mediaType(contentType)
	switch {
	case media == BatchContentType:
		return nil, refuse("unsupported-mode", "batch mode is not supported: send one event per request")
	case media == StructuredContentType:
		return parseStructured(body)
	case strings.HasPrefix(media, "application/cloudevents"):
		return nil, refuse("unsupported-mode", "structured mode with %s is not supported: use %s", media, StructuredContentType)
	case header.Get("Ce-Specversion") != "" || header.Get("Ce-Id") != "" || header.Get("Ce-Type") != "":
		return parseBinary(header, contentType, body)
	}
	shown := "missing"
	if _, present := header["Content-Type"]; present {
		shown = strconv.Quote(contentType)
	}
	return nil, refuse("malformed", "not a CloudEvent: no ce-specversion header and content-type %s is not %s", shown, StructuredContentType)
}

func parseBinary(header http.Header, contentType string, body []byte) (*event.Event, *ContractError) {
	kept := http.Header{}
	raw := map[string]any{}
	for name, values := range header {
		lower := strings.ToLower(name)
		if lower == "content-type" {
			kept.Set(name, values[0])
			continue
		}
		attribute, isAttribute := strings.CutPrefix(lower, "ce-")
		// Intermediaries add headers that merely look like attributes; they are not ours to refuse.
		if !isAttribute || !attributeName.MatchString(attribute) || attribute == "data" || attribute == "datacontenttype" {
			continue
		}
		value := decodeHeaderValue(values[0])
		kept.Set(name, value)
		raw[attribute] = value
	}
	if problem := coreProblem(raw); problem != "" {
		return nil, refuse("malformed", "%s", problem)
	}
	_, hasContentType := header["Content-Type"]
	if len(body) > 0 && (!hasContentType || isJSON(contentType)) && !json.Valid(body) {
		shown := contentType
		if !hasContentType {
			shown = "missing, JSON assumed"
		}
		return nil, refuse("malformed", "body is not valid JSON (content-type %s)", shown)
	}
	return toEvent(kept, body)
}

func parseStructured(body []byte) (*event.Event, *ContractError) {
	var document map[string]any
	if err := json.Unmarshal(body, &document); err != nil {
		var anything any
		if json.Unmarshal(body, &anything) == nil {
			return nil, refuse("malformed", "structured body must be a JSON object")
		}
		return nil, refuse("malformed", "body is not valid JSON (content-type %s)", StructuredContentType)
	}
	kept := map[string]any{}
	for name, value := range document {
		if name == "data" || name == "data_base64" {
			kept[name] = value
			continue
		}
		if !attributeName.MatchString(name) {
			continue
		}
		switch value.(type) {
		case string, bool, float64:
		default:
			if !core[name] {
				return nil, refuse("malformed", "extension attribute %q must be a string, number or boolean", name)
			}
		}
		kept[name] = value
	}
	if problem := coreProblem(kept); problem != "" {
		return nil, refuse("malformed", "%s", problem)
	}
	if _, hasData := kept["data"]; hasData {
		if _, hasBase64 := kept["data_base64"]; hasBase64 {
			return nil, refuse("malformed", "structured body has both data and data_base64")
		}
	}
	filtered, _ := json.Marshal(kept)
	return toEvent(http.Header{"Content-Type": {StructuredContentType}}, filtered)
}

func toEvent(header http.Header, body []byte) (*event.Event, *ContractError) {
	message := cehttp.NewMessage(header, io.NopCloser(bytes.NewReader(body)))
	e, err := binding.ToEvent(context.Background(), message)
	if err == nil {
		err = e.Validate()
	}
	if err != nil {
		return nil, refuse("malformed", "not a valid CloudEvent: %v", err)
	}
	return e, nil
}

// JSONData is the event's data as a JSON value, or invalid-data when it is not JSON.
func JSONData(e *event.Event) (any, *ContractError) {
	if contentType := e.DataContentType(); contentType != "" && !isJSON(contentType) {
		return nil, refuse("invalid-data", "datacontenttype %q is not %s", contentType, JSONContentType)
	}
	if e.DataBase64 {
		return nil, refuse("invalid-data", "data must be JSON, not binary (data_base64)")
	}
	if len(e.Data()) == 0 {
		return nil, nil
	}
	var data any
	if err := json.Unmarshal(e.Data(), &data); err != nil {
		return nil, refuse("invalid-data", "data is not JSON")
	}
	// Some senders stringify the JSON twice; a string that parses is taken as what they meant.
	if text, ok := data.(string); ok {
		var inner any
		if json.Unmarshal([]byte(text), &inner) == nil {
			return inner, nil
		}
	}
	return data, nil
}

// Request is a validated revision.prestart.requested, as a hook sees it.
type Request struct {
	Event *event.Event
	Data  map[string]any
	// CorrelationID is echoed as replyid on every reply; only the gate can check it.
	CorrelationID string
	Hook          string
	Attempt       int
	Subject       string
	// Key is source#id: the same request delivered twice has the same key.
	Key string
	// Version is 1 for a request from a gate older than revision.containers, 2 otherwise.
	Version int
}

// The dataschema of a protocol version 2 request (revision.containers). A request without one
// comes from a version 1 gate; any other value is read with the version 2 rules (a newer gate).
const (
	RequestedDataSchemaV2 = "https://prestart.dev/schemas/v1alpha1/requested.data.v2.schema.json"
	RequestedDataSchemaV1 = "https://prestart.dev/schemas/v1alpha1/requested.data.schema.json"
)

// RequestedVersion is the protocol version an event's dataschema declares.
func RequestedVersion(dataschema string) int {
	if dataschema == "" || dataschema == RequestedDataSchemaV1 {
		return 1
	}
	return 2
}

// ImageToRun is what one container runs: Knative's digest, else the image as written (a registry
// Knative does not resolve runs exactly that).
type ImageToRun struct {
	Name string
	Ref  string
}

// ImagesToRun lists what to scan or run, container by container, in the request's order; ok is
// false for a request from a version 1 gate, which does not say what will run.
func (r *Request) ImagesToRun() (images []ImageToRun, ok bool) {
	containers, ok := r.Data["revision"].(map[string]any)["containers"].([]any)
	if !ok {
		return nil, false
	}
	images = []ImageToRun{}
	for _, value := range containers {
		c := value.(map[string]any)
		ref, _ := c["digest"].(string)
		if ref == "" {
			ref, _ = c["image"].(string)
		}
		name, _ := c["name"].(string)
		images = append(images, ImageToRun{Name: name, Ref: ref})
	}
	return images, true
}

func (r *Request) Action() string { return r.Data["action"].(string) }

// AttemptKey is what a cancel names: the key of the start it cancels (its id is the cancel's
// without /cancel). Ids name the PrestartRun: a run created again starts at attempt 1 again under new ids.
func (r *Request) AttemptKey() string {
	if r.Action() == "cancel" {
		return strings.TrimSuffix(r.Key, "/cancel")
	}
	return r.Key
}

// Deadline is zero when the request has none (a cancel).
func (r *Request) Deadline() time.Time {
	text, _ := r.Data["deadline"].(string)
	t, _ := ParseRFC3339(text)
	return t
}

func (r *Request) ReplyTo() string {
	replyTo, _ := r.Data["replyTo"].(string)
	return replyTo
}

func (r *Request) Params() map[string]any {
	return r.Data["hook"].(map[string]any)["params"].(map[string]any)
}

// ParseRequested reads and validates a request; the error says what to answer.
func ParseRequested(header http.Header, body []byte) (*Request, *ContractError) {
	e, err := ParseMessage(header, body, MaxRequestBytes)
	if err != nil {
		return nil, err
	}
	if e.Type() != RequestedType {
		return nil, refuse("wrong-type", "type is %q, expected %q", e.Type(), RequestedType)
	}
	correlationID, _ := e.Extensions()[ExtCorrelationID].(string)
	if correlationID == "" || len(correlationID) > MaxCorrelationIDLength {
		return nil, refuse("malformed", "missing or oversized %s extension: a reply could not be correlated", ExtCorrelationID)
	}
	value, err := JSONData(e)
	if err != nil {
		return nil, err
	}
	version := RequestedVersion(e.DataSchema())
	if problem := CheckRequestedData(value, version); problem != "" {
		return nil, refuse("invalid-data", "%s", problem)
	}
	data := value.(map[string]any)
	name := data["hook"].(map[string]any)["name"].(string)
	attempt := int(data["attempt"].(float64))
	if hook, present := e.Extensions()[ExtHook]; present && hook != name {
		return nil, refuse("hook-mismatch", "%s %q differs from data.hook.name %q", ExtHook, hook, name)
	}
	if given, present := e.Extensions()[ExtAttempt]; present {
		if n, err := types.ToInteger(given); err != nil || int(n) != attempt {
			return nil, refuse("hook-mismatch", "%s %v differs from data.attempt %d", ExtAttempt, given, attempt)
		}
	}
	return &Request{
		Event:         e,
		Data:          data,
		CorrelationID: correlationID,
		Hook:          name,
		Attempt:       attempt,
		Subject:       e.Subject(),
		Key:           e.Source() + "#" + e.ID(),
		Version:       version,
	}, nil
}

// Contribution is a Secret projected into the Revision's pods.
type Contribution struct {
	Name       string            `json:"name"`
	SecretName string            `json:"secretName"`
	As         string            `json:"as"`
	Env        map[string]string `json:"env,omitempty"`
}

// CompletedData is the data of a revision.prestart.completed, members in schema order.
type CompletedData struct {
	Outcome       string         `json:"outcome"`
	Message       *string        `json:"message,omitempty"`
	Details       *string        `json:"details,omitempty"`
	Progress      *int           `json:"progress,omitempty"`
	RetryAfter    *int           `json:"retryAfter,omitempty"`
	Contributions []Contribution `json:"contributions,omitempty"`
}

// BuildCompleted is a reply to req; id "" makes a fresh one, a zero time means now. It fails
// when data breaks the schema: that is a bug, not something to send.
func BuildCompleted(req *Request, data CompletedData, source, id string, at time.Time) (event.Event, error) {
	encoded, err := json.Marshal(data)
	if err != nil {
		return event.Event{}, err
	}
	var generic any
	_ = json.Unmarshal(encoded, &generic)
	if problem := CheckCompletedData(generic); problem != "" {
		return event.Event{}, fmt.Errorf("%s", problem)
	}
	if id == "" {
		id = uuid.NewString()
	}
	if at.IsZero() {
		at = time.Now()
	}
	e := event.New(event.CloudEventsVersionV1)
	e.SetID(id)
	e.SetSource(source)
	e.SetType(CompletedType)
	e.SetTime(at.UTC())
	if req.Subject != "" {
		e.SetSubject(req.Subject)
	}
	// Byte for byte: the gate takes the reply's identity from this alone.
	e.SetExtension(ExtReplyID, req.CorrelationID)
	e.SetExtension(ExtHook, req.Hook)
	e.SetExtension(ExtAttempt, req.Attempt)
	if err := e.SetData(JSONContentType, json.RawMessage(encoded)); err != nil {
		return event.Event{}, err
	}
	return e, e.Validate()
}

// NewBinaryRequest is a POST of e to url in binary content mode, attributes percent-encoded.
func NewBinaryRequest(ctx context.Context, url string, e event.Event) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return nil, err
	}
	if err := cehttp.WriteRequest(binding.WithForceBinary(ctx), binding.ToMessage(&e), req); err != nil {
		return nil, err
	}
	for name, values := range req.Header {
		if strings.HasPrefix(name, "Ce-") {
			for i, v := range values {
				values[i] = encodeHeaderValue(v)
			}
		}
	}
	return req, nil
}

// HTTP binding 3.1.3.2: space, '"', '%' and everything outside printable ASCII is percent-encoded as UTF-8.
func encodeHeaderValue(value string) string {
	var b strings.Builder
	for _, c := range []byte(value) {
		if c >= 0x21 && c <= 0x7e && c != '"' && c != '%' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func decodeHeaderValue(value string) string {
	if !strings.Contains(value, "%") {
		return value
	}
	decoded, err := url.PathUnescape(value)
	if err != nil {
		// A sender that does not encode may still send a literal '%'.
		return value
	}
	return decoded
}
