// POSTs a completed event (binary mode) to the gate's sink or a Broker, retrying what may work
// later (network errors, 5xx, 408, 409, 429) with bounded exponential backoff. Any other 4xx is
// the gate refusing the reply for good (a stale attempt, a cancelled hook): retrying would only
// repeat it.
package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
)

type SendPolicy struct {
	Attempts  int
	BaseDelay time.Duration
	MaxDelay  time.Duration
	// MaxElapsed: no new try starts after this long since the first one.
	MaxElapsed time.Duration
	// Timeout is per try.
	Timeout time.Duration
}

var DefaultSendPolicy = SendPolicy{Attempts: 6, BaseDelay: 250 * time.Millisecond, MaxDelay: 10 * time.Second, MaxElapsed: time.Minute, Timeout: 10 * time.Second}

type SendError struct {
	Reason    string
	Permanent bool
}

func (e *SendError) Error() string { return e.Reason }

func isRetriable(status int) bool {
	return status == 408 || status == 409 || status == 429 || status >= 500
}

// A redirected POST would turn into a GET: the 3xx is the answer.
var client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func delay(retry int, p SendPolicy) time.Duration {
	// Half fixed, half random: many hooks retrying against one Broker must not retry in lockstep.
	step := min(p.MaxDelay, p.BaseDelay<<(retry-1))
	return step/2 + time.Duration(rand.Int64N(int64(step/2)+1))
}

// PostEvent returns nil once a 2xx came back, else a *SendError.
func PostEvent(ctx context.Context, url string, e event.Event, p SendPolicy) error {
	started := time.Now()
	for tries := 1; ; tries++ {
		reason, permanent := postOnce(ctx, url, e, p.Timeout)
		if reason == "" {
			return nil
		}
		if permanent {
			return &SendError{Reason: reason, Permanent: true}
		}
		wait := delay(tries, p)
		if tries >= p.Attempts || time.Since(started)+wait > p.MaxElapsed {
			return &SendError{Reason: fmt.Sprintf("%s (gave up after %d tries)", reason, tries)}
		}
		select {
		case <-ctx.Done():
			return &SendError{Reason: fmt.Sprintf("POST %s stopped: %v", url, context.Cause(ctx)), Permanent: true}
		case <-time.After(wait):
		}
	}
}

// postOnce returns "" on a 2xx, else why not and whether trying again is pointless.
func postOnce(ctx context.Context, url string, e event.Event, timeout time.Duration) (string, bool) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := NewBinaryRequest(ctx, url, e)
	if err != nil {
		return fmt.Sprintf("cannot build the POST to %s: %v", url, err), true
	}
	token, err := ReplyToken()
	if err != nil {
		// The kubelet writes the file before the container starts; missing now, it may be there at the next try.
		return fmt.Sprintf("POST %s: %v", url, err), false
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Sprintf("POST %s: %v", url, err), false
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return "", false
	}
	reason := fmt.Sprintf("POST %s answered %d", url, resp.StatusCode)
	if len(answer) > 0 {
		reason += ": " + strings.ReplaceAll(string(answer), "\n", " ")
	}
	return reason, !isRetriable(resp.StatusCode)
}

// DefaultTokenFile is where the projected ServiceAccount token for the gate's sink audience is
// mounted (docs/protocol.md, "Sender identity").
const DefaultTokenFile = "/var/run/secrets/tokens/prestart-token"

// ReplyToken is the token to send with a reply, read on every send (the kubelet replaces the file
// before it expires). A file named by PRESTART_TOKEN_FILE must exist; the default one may be
// absent, and then replies carry no token.
func ReplyToken() (string, error) {
	named := os.Getenv("PRESTART_TOKEN_FILE")
	path := named
	if path == "" {
		path = DefaultTokenFile
	}
	b, err := os.ReadFile(path)
	if err != nil {
		if named == "" && os.IsNotExist(err) {
			return "", nil
		}
		return "", fmt.Errorf("the reply token file %s cannot be read: %w", path, err)
	}
	return strings.TrimSpace(string(b)), nil
}
