// The real node's test app, one static binary in an image from scratch
// (devcluster/build-binaries.sh node):
//
//	test-app            serves HTTP on $PORT (default 8080): every path answers a JSON object
//	                    with the pod's hostname, its environment and the caller's address.
//	test-app fetch URL  GETs URL until it answers 2xx or $FETCH_TIMEOUT (default 60s) passes,
//	                    prints the body and writes it to /dev/termination-log (the pod's status
//	                    shows it as the container's termination message); exit 0 on success.
//	test-app kube PATH  the same for https://kubernetes.default.svc/PATH, as an in-cluster client
//	                    does: the mounted ServiceAccount token as Bearer, the mounted ca.crt as
//	                    the only trusted CA.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "fetch" {
		if len(os.Args) != 3 {
			fmt.Fprintln(os.Stderr, "usage: test-app fetch URL")
			os.Exit(2)
		}
		os.Exit(fetch(&http.Client{Timeout: 5 * time.Second}, os.Args[2], ""))
	}
	if len(os.Args) > 1 && os.Args[1] == "kube" {
		if len(os.Args) != 3 {
			fmt.Fprintln(os.Stderr, "usage: test-app kube PATH")
			os.Exit(2)
		}
		os.Exit(kube(strings.TrimPrefix(os.Args[2], "/")))
	}
	serve()
}

type answer struct {
	Hostname string            `json:"hostname"`
	Env      map[string]string `json:"env"`
	Remote   string            `json:"remote"`
	Path     string            `json:"path"`
}

func serve() {
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	host, _ := os.Hostname()
	env := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(answer{Hostname: host, Env: env, Remote: r.RemoteAddr, Path: r.URL.Path})
	})
	srv := &http.Server{Addr: ":" + port, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-stop
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}()
	fmt.Printf("test-app %s listening on :%s\n", host, port)
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

func kube(path string) int {
	token, err := os.ReadFile(saDir + "/token")
	if err == nil {
		var ca []byte
		if ca, err = os.ReadFile(saDir + "/ca.crt"); err == nil {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(ca) {
				err = fmt.Errorf("no certificate in %s/ca.crt", saDir)
			} else {
				client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
				return fetch(client, "https://kubernetes.default.svc/"+path, "Bearer "+strings.TrimSpace(string(token)))
			}
		}
	}
	msg := err.Error()
	fmt.Fprintln(os.Stderr, msg)
	_ = os.WriteFile("/dev/termination-log", []byte(msg), 0o644)
	return 1
}

func fetch(client *http.Client, url, authorization string) int {
	timeout := 60 * time.Second
	if raw := os.Getenv("FETCH_TIMEOUT"); raw != "" {
		if d, err := time.ParseDuration(raw); err == nil {
			timeout = d
		}
	}
	deadline := time.Now().Add(timeout)
	var last string
	for attempt := 1; ; attempt++ {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		res, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
			res.Body.Close()
			if res.StatusCode/100 == 2 {
				fmt.Printf("%s\n", body)
				_ = os.WriteFile("/dev/termination-log", body, 0o644)
				return 0
			}
			last = fmt.Sprintf("attempt %d: %s answered %d", attempt, url, res.StatusCode)
		} else {
			last = fmt.Sprintf("attempt %d: %v", attempt, err)
		}
		fmt.Fprintln(os.Stderr, last)
		if time.Now().After(deadline) {
			_ = os.WriteFile("/dev/termination-log", []byte(last), 0o644)
			return 1
		}
		time.Sleep(500 * time.Millisecond)
	}
}
