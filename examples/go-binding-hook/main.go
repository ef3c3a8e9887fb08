// A prestart binding hook in Go: net/http answers every delivery at once (202, empty body), the
// provisioning runs in the background, and the completed event is POSTed to K_SINK or the
// request's data.replyTo.
//
//	go run .
//
// Environment: PORT (8080; 0 picks a free one), HOST (0.0.0.0), HOOK_NAME (provision-db),
// PROVISION_MS (3000), K_SINK, LOG_LEVEL (info).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

type Settings struct {
	HookName    string
	ProvisionMs int
	Sink        string
	Host        string
	Port        string
	LogLevel    slog.Level
}

func settingsFromEnv() (Settings, error) {
	s := Settings{
		HookName: env("HOOK_NAME", "provision-db"),
		Sink:     os.Getenv("K_SINK"),
		Host:     env("HOST", "0.0.0.0"),
		Port:     env("PORT", "8080"),
	}
	ms, err := strconv.Atoi(env("PROVISION_MS", "3000"))
	if err != nil || ms < 0 {
		return s, fmt.Errorf("PROVISION_MS must be a number of milliseconds, got %q", os.Getenv("PROVISION_MS"))
	}
	s.ProvisionMs = ms
	if err := s.LogLevel.UnmarshalText([]byte(env("LOG_LEVEL", "info"))); err != nil {
		return s, fmt.Errorf("LOG_LEVEL: %w", err)
	}
	return s, nil
}

func env(name, fallback string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return fallback
}

// NewHandler serves deliveries at any path (Knative posts to "/", a Trigger to its subscriber's path).
func NewHandler(s Settings, runner *Runner, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "ok")
	})
	mux.HandleFunc("POST /", func(w http.ResponseWriter, r *http.Request) {
		// Every answer below is either a 4xx with a reason or a 202 with an EMPTY body: behind a
		// Broker, a 2xx body that is not a CloudEvent becomes a 502, which is retried.
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			refuseWith(w, log, refuse("too-large", "the request is larger than %d bytes", MaxRequestBytes))
			return
		}
		if err != nil {
			refuseWith(w, log, refuse("malformed", "cannot read the body: %v", err))
			return
		}
		req, refused := ParseRequested(r.Header, body)
		if refused != nil {
			refuseWith(w, log, refused)
			return
		}
		switch {
		case req.Hook != s.HookName:
			log.Info("request ignored: it is for another hook", "event", req.Key, "hook", req.Hook, "serves", s.HookName)
		case req.Action() == "cancel":
			log.Info("cancel", "event", req.Key, "reason", req.Data["reason"], "result", runner.Cancel(req))
		default:
			// What will run, as the request names it: digests where Knative resolved them.
			log.Info("request", "event", req.Key, "images", ImagesLine(req), "result", runner.Submit(req))
		}
		w.WriteHeader(http.StatusAccepted)
	})
	return mux
}

func refuseWith(w http.ResponseWriter, log *slog.Logger, err *ContractError) {
	log.Warn("request refused", "code", err.Code, "reason", err.Reason)
	body, _ := json.Marshal(err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(err.Status)
	_, _ = w.Write(body)
}

func main() {
	s, err := settingsFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: s.LogLevel}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	listener, err := net.Listen("tcp", net.JoinHostPort(s.Host, s.Port))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	runner := NewRunner(ctx, ProvisionDatabase(time.Duration(s.ProvisionMs)*time.Millisecond), "/prestart-hooks/"+s.HookName, s.Sink, log)
	server := &http.Server{Handler: NewHandler(s, runner, log), ReadHeaderTimeout: 10 * time.Second}
	host := s.Host
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	fmt.Printf("hook %q listening on http://%s\n", s.HookName, net.JoinHostPort(host, strconv.Itoa(listener.Addr().(*net.TCPAddr).Port)))

	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = server.Shutdown(shutdown)
	}()
	if err := server.Serve(listener); !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
