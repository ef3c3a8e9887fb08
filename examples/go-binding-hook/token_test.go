package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
)

// A reply carries the projected token as a bearer token, read again when the file changes.
func TestReplyCarriesTheTokenFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "prestart-token")
	t.Setenv("PRESTART_TOKEN_FILE", file)
	var seen []string
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Header.Get("Authorization"))
		w.WriteHeader(http.StatusAccepted)
	}))
	defer sink.Close()
	e := event.New()
	e.SetID("r1")
	e.SetSource("/hooks/test")
	e.SetType("revision.prestart.completed")
	_ = e.SetData("application/json", map[string]string{"outcome": "succeeded"})
	for _, token := range []string{"first", "second"} {
		if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := PostEvent(context.Background(), sink.URL, e, DefaultSendPolicy); err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) != 2 || seen[0] != "Bearer first" || seen[1] != "Bearer second" {
		t.Fatalf("Authorization headers: %q", seen)
	}
}

// A named file that is missing is an error (retried), never a reply sent without the token.
func TestNamedTokenFileMustExist(t *testing.T) {
	t.Setenv("PRESTART_TOKEN_FILE", filepath.Join(t.TempDir(), "absent"))
	if _, err := ReplyToken(); err == nil {
		t.Fatal("expected an error for a missing token file")
	}
}
