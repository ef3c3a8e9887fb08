// Runs the work once per request. Deliveries are at least once and the gate re-sends unanswered
// requests, so: a repeat of a running request joins it, a repeat of a finished one gets the same
// final event again (same id: the gate sees a duplicate), and a cancel stops the run or, when it
// overtook its start, keeps that start from running. Nothing is sent for a cancelled run or one
// whose deadline passed: the gate has stopped listening.
package main

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
)

// Outcome is what the work produced: succeeded (with contributions), failed (with a message), or
// not ready yet: RetryAfter > 0 asks the gate to ask again in that many seconds (Message: why).
type Outcome struct {
	Succeeded     bool
	Message       string
	Contributions []Contribution
	RetryAfter    int
}

// Progress sends a non-final report; a lost report only costs a status update.
type Progress func(percent int, message string)

// Work must return soon after ctx is done (a cancel, the deadline, shutdown).
type Work func(ctx context.Context, req *Request, progress Progress) Outcome

var errCancelled = errors.New("cancelled by the gate")

type Runner struct {
	work   Work
	source string
	// sink (K_SINK, injected by a SinkBinding) wins over data.replyTo: an operator who bound the
	// hook to a Broker wants replies to go through it.
	sink   string
	policy SendPolicy
	log    *slog.Logger
	// base ends at shutdown, stopping runs and sends.
	base context.Context

	mu               sync.Mutex
	running          map[string]context.CancelCauseFunc
	runningByAttempt map[string]string
	finished         *bounded[event.Event]
	cancelled        *bounded[string]
}

func NewRunner(base context.Context, work Work, source, sink string, log *slog.Logger) *Runner {
	return &Runner{
		work: work, source: source, sink: sink, policy: DefaultSendPolicy, log: log, base: base,
		running:          map[string]context.CancelCauseFunc{},
		runningByAttempt: map[string]string{},
		finished:         newBounded[event.Event](1000),
		cancelled:        newBounded[string](1000),
	}
}

func (r *Runner) target(req *Request) string {
	if r.sink != "" {
		return r.sink
	}
	return req.ReplyTo()
}

// Submit takes a start; it returns what became of it, for the log.
func (r *Runner) Submit(req *Request) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if final, ok := r.finished.get(req.Key); ok {
		go r.deliver(req, final)
		return fmt.Sprintf("finished before: sending the same reply %s again", final.ID())
	}
	if _, ok := r.running[req.Key]; ok {
		return "joined the run in progress"
	}
	if why, ok := r.cancelled.get(req.AttemptKey()); ok {
		return fmt.Sprintf("not run: it was cancelled before it started (%s)", why)
	}
	deadline := req.Deadline()
	if !deadline.After(time.Now()) {
		return fmt.Sprintf("not run: its deadline %v has passed", req.Data["deadline"])
	}
	ctx, stopDeadline := context.WithDeadline(r.base, deadline)
	ctx, cancel := context.WithCancelCause(ctx)
	r.running[req.Key] = cancel
	r.runningByAttempt[req.AttemptKey()] = req.Key
	go func() {
		defer stopDeadline()
		defer cancel(nil)
		r.run(ctx, req)
	}()
	return "started"
}

// Cancel stops the run of the attempt a cancel names, or remembers the cancel for a start still to come.
func (r *Runner) Cancel(req *Request) string {
	reason, _ := req.Data["reason"].(string)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cancelled.set(req.AttemptKey(), reason)
	key, ok := r.runningByAttempt[req.AttemptKey()]
	if !ok {
		return "remembered"
	}
	r.running[key](fmt.Errorf("%w: %s", errCancelled, reason))
	return "stopped the run"
}

func (r *Runner) run(ctx context.Context, req *Request) {
	where := fmt.Sprintf("%s attempt %d", req.Subject, req.Attempt)
	r.log.Info("run started", "for", where, "event", req.Key)
	outcome, thrown := r.safely(ctx, req)

	r.mu.Lock()
	delete(r.running, req.Key)
	delete(r.runningByAttempt, req.AttemptKey())
	if ctx.Err() != nil {
		r.mu.Unlock()
		r.log.Info("run ended without a reply", "for", where, "because", context.Cause(ctx))
		return
	}
	final := r.finalEvent(req, outcome, thrown)
	r.finished.set(req.Key, final)
	r.mu.Unlock()
	r.deliver(req, final)
}

// safely runs the work; a panic must still end the attempt with a readable "failed".
func (r *Runner) safely(ctx context.Context, req *Request) (outcome Outcome, thrown any) {
	defer func() { thrown = recover() }()
	return r.work(ctx, req, r.progressSender(ctx, req)), nil
}

func (r *Runner) finalEvent(req *Request, outcome Outcome, thrown any) event.Event {
	data := CompletedData{Outcome: "failed"}
	switch {
	case thrown != nil:
		r.log.Warn("the work panicked; replying failed", "event", req.Key, "panic", thrown)
		data.Message = ptr(clip(fmt.Sprintf("the hook threw: %v", thrown)))
	case outcome.RetryAfter > 0:
		// The attempt ends here; the gate asks again (a new attempt, a new id) after the delay.
		data.Outcome = "retry"
		data.RetryAfter = ptr(outcome.RetryAfter)
		data.Message = ptr(clip(outcome.Message))
		if outcome.Message == "" {
			data.Message = ptr("not ready yet")
		}
	case outcome.Succeeded:
		data.Outcome = "succeeded"
		if outcome.Message != "" {
			data.Message = ptr(clip(outcome.Message))
		}
		data.Contributions = outcome.Contributions
	default:
		data.Message = ptr(clip(outcome.Message))
		if outcome.Message == "" {
			data.Message = ptr("failed")
		}
	}
	final, err := BuildCompleted(req, data, r.source, "", time.Time{})
	if err != nil {
		invalid := CompletedData{Outcome: "failed", Message: ptr(clip("the hook returned an invalid outcome: " + err.Error()))}
		final, _ = BuildCompleted(req, invalid, r.source, "", time.Time{})
	}
	return final
}

func (r *Runner) progressSender(ctx context.Context, req *Request) Progress {
	return func(percent int, message string) {
		target := r.target(req)
		if target == "" || ctx.Err() != nil {
			return
		}
		percent = max(0, min(100, percent))
		report, err := BuildCompleted(req, CompletedData{Outcome: "progress", Progress: &percent, Message: ptr(clip(message))}, r.source, "", time.Time{})
		if err == nil {
			err = PostEvent(ctx, target, report, r.policy)
		}
		// A run that was stopped meanwhile has nobody left to report to.
		if err != nil && ctx.Err() == nil {
			r.log.Warn("progress report not delivered", "event", req.Key, "error", err)
		}
	}
}

func (r *Runner) deliver(req *Request, final event.Event) {
	target := r.target(req)
	var data CompletedData
	_ = final.DataAs(&data)
	if target == "" {
		r.log.Error("no K_SINK and no data.replyTo: the reply cannot be sent", "event", req.Key, "outcome", data.Outcome)
		return
	}
	if err := PostEvent(r.base, target, final, r.policy); err != nil {
		r.log.Error("reply not delivered; it is sent again when the gate re-sends the request", "reply", final.ID(), "error", err)
		return
	}
	r.log.Info("reply sent", "reply", final.ID(), "outcome", data.Outcome, "to", target)
}

func ptr[T any](v T) *T { return &v }

func clip(message string) string {
	runes := []rune(message)
	if len(runes) <= MaxMessage {
		return message
	}
	return string(runes[:MaxMessage-1]) + "…"
}

// bounded forgets the least recently used entries beyond its capacity: memory must not grow
// with every Revision the hook ever saw.
type bounded[V any] struct {
	capacity int
	order    *list.List
	entries  map[string]*list.Element
}

type entry[V any] struct {
	key   string
	value V
}

func newBounded[V any](capacity int) *bounded[V] {
	return &bounded[V]{capacity: capacity, order: list.New(), entries: map[string]*list.Element{}}
}

func (b *bounded[V]) get(key string) (V, bool) {
	element, ok := b.entries[key]
	if !ok {
		var zero V
		return zero, false
	}
	b.order.MoveToBack(element)
	return element.Value.(*entry[V]).value, true
}

func (b *bounded[V]) set(key string, value V) {
	if element, ok := b.entries[key]; ok {
		element.Value.(*entry[V]).value = value
		b.order.MoveToBack(element)
		return
	}
	b.entries[key] = b.order.PushBack(&entry[V]{key, value})
	for b.order.Len() > b.capacity {
		oldest := b.order.Front()
		b.order.Remove(oldest)
		delete(b.entries, oldest.Value.(*entry[V]).key)
	}
}
