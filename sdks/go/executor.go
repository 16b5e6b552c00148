package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultPathPrefix is where the scheduler calls executors unless told otherwise.
const DefaultPathPrefix = "/internal/job"

// Defaults of what the executor remembers (docs/executor-protocol.md §4).
const (
	KeepFinished       = 10_000
	KeepFinishedFor    = 10 * time.Minute
	KeepFinishedAtMost = 1_000_000
)

// Context is what a handler knows about the execution it runs. Its context.Context is done at
// the job's timeoutSeconds or when the scheduler cancels the execution.
type Context struct {
	context.Context
	Call
	log *capture
}

// Shards are the shard indexes of this execution, in order.
func (c *Context) Shards() []int {
	out := make([]int, 0, c.ShardEnd-c.ShardStart+1)
	for i := c.ShardStart; i <= c.ShardEnd; i++ {
		out = append(out, i)
	}
	return out
}

// OwnsID reports, for MOD_HASH jobs, whether a record belongs to this execution (id %
// shardCount in range).
func (c *Context) OwnsID(id uint64) bool {
	count := uint64(c.ShardCount)
	if count == 0 {
		count = 1
	}
	shard := int(id % count)
	return c.ShardStart <= shard && shard <= c.ShardEnd
}

// Params decodes the job's parameters into v.
func (c *Context) Params(v interface{}) error {
	if len(c.JobParams) == 0 {
		return json.Unmarshal([]byte("null"), v)
	}
	return json.Unmarshal(c.JobParams, v)
}

// HandlerFunc runs one execution: a message for SUCCESS, or an error for FAILED. Return
// Result-typed outcomes with ResultError.
type HandlerFunc func(ctx *Context) (string, error)

// ResultError lets a handler return any Result as its error (a failure with a status, say).
type ResultError struct{ Result Result }

func (e ResultError) Error() string { return e.Result.Message }

type registered struct {
	fn         HandlerFunc
	background bool
}

type entry struct {
	reportURL      string
	reportWhenDone bool
	result         *Result
	stopReason     *Result
	cancel         context.CancelFunc
	stopOnce       sync.Once
	stopAsked      chan struct{}
	finished       chan struct{}
	stuck          chan struct{}
}

func newEntry(reportURL string) *entry {
	return &entry{reportURL: reportURL, stopAsked: make(chan struct{}), finished: make(chan struct{}), stuck: make(chan struct{}), cancel: func() {}}
}

type finishedAt struct {
	traceID string
	at      time.Time
}

// Executor serves handlers over HTTP: an http.Handler for POST {prefix}/{handler},
// GET {prefix}/status/{traceId} and POST {prefix}/cancel/{traceId}.
type Executor struct {
	secret     []byte
	prefix     string
	handlers   map[string]registered
	startedAt  time.Time
	stopWait   time.Duration
	attempts   int
	keepLeast  int
	keepFor    time.Duration
	keepMost   int
	httpClient *http.Client
	logger     *log.Logger
	logBound   int
	carried    *carriedLogs

	mu              sync.Mutex
	entries         map[string]*entry
	finished        []finishedAt // oldest-finished first
	rememberedSince time.Time
}

// Option tunes an Executor.
type Option func(*Executor)

// WithPathPrefix serves another prefix than /internal/job (announce it through the Nacos
// metadata key jobflow.path-prefix).
func WithPathPrefix(prefix string) Option {
	return func(e *Executor) { e.prefix = strings.TrimRight(prefix, "/") }
}

// WithKeep sets how many finished executions are remembered at least, for how long at least,
// and how many at most.
func WithKeep(atLeast int, forAtLeast time.Duration, atMost int) Option {
	return func(e *Executor) { e.keepLeast, e.keepFor, e.keepMost = atLeast, forAtLeast, atMost }
}

// WithStopWait sets how long a stopped handler is waited for before it is reported as still
// running (default 10 s).
func WithStopWait(d time.Duration) Option { return func(e *Executor) { e.stopWait = d } }

// WithLogger sets where the executor logs (default: the standard logger).
func WithLogger(l *log.Logger) Option { return func(e *Executor) { e.logger = l } }

// New returns an executor that accepts only calls signed with secret (the scheduler's
// executor.signing_secret). An empty secret accepts unsigned calls: anyone who reaches the
// executor runs its handlers, so only on a trusted network.
func New(secret string, opts ...Option) *Executor {
	now := time.Now()
	e := &Executor{
		prefix: DefaultPathPrefix, handlers: map[string]registered{}, startedAt: now,
		stopWait: 10 * time.Second, attempts: 8, keepLeast: KeepFinished, keepFor: KeepFinishedFor,
		keepMost: KeepFinishedAtMost, httpClient: &http.Client{Timeout: 10 * time.Second},
		logger: log.Default(), entries: map[string]*entry{}, rememberedSince: now,
		logBound: DefaultLogBound, carried: newCarriedLogs(carriedMemory),
	}
	if secret != "" {
		e.secret = []byte(secret)
	}
	for _, o := range opts {
		o(e)
	}
	return e
}

// Handle registers fn as the handler name; the call waits for its result.
func (e *Executor) Handle(name string, fn HandlerFunc) { e.handlers[name] = registered{fn, false} }

// HandleBackground registers fn as the handler name; its call is answered 202 at once and the
// result is reported to the scheduler when fn returns.
func (e *Executor) HandleBackground(name string, fn HandlerFunc) {
	e.handlers[name] = registered{fn, true}
}

func (e *Executor) signed(method, path string, h http.Header, traceID string, body []byte) bool {
	return e.secret == nil || Verify(e.secret, method, path, h, traceID, body, time.Now())
}

// ServeHTTP answers the executor's requests; other paths get 404.
func (e *Executor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.EscapedPath()
	if !strings.HasPrefix(path, e.prefix+"/") {
		answer(w, http.StatusNotFound, map[string]interface{}{"message": "not found"})
		return
	}
	rest, _ := url.PathUnescape(path[len(e.prefix)+1:])
	switch {
	case r.Method == http.MethodGet && strings.HasPrefix(rest, "status/"):
		id := strings.TrimPrefix(rest, "status/")
		if !e.signed(r.Method, path, r.Header, id, nil) {
			answer(w, http.StatusUnauthorized, map[string]interface{}{"message": "missing or wrong signature"})
			return
		}
		status, body := e.status(id)
		answer(w, status, body)
	case r.Method == http.MethodPost && strings.HasPrefix(rest, "cancel/"):
		id := strings.TrimPrefix(rest, "cancel/")
		if !e.signed(r.Method, path, r.Header, id, nil) {
			answer(w, http.StatusUnauthorized, map[string]interface{}{"message": "missing or wrong signature"})
			return
		}
		status, body := e.cancelExecution(id)
		answer(w, status, body)
	case r.Method == http.MethodPost && !strings.Contains(rest, "/"):
		body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
		if err != nil {
			answer(w, http.StatusBadRequest, Failure("unreadable body"))
			return
		}
		status, result := e.call(r.Context(), rest, path, r.Header, body)
		answer(w, status, result)
	default:
		answer(w, http.StatusNotFound, Failure("no route "+r.Method+" "+path))
	}
}

func answer(w http.ResponseWriter, status int, body interface{}) {
	data, _ := json.Marshal(body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

func rfc3339(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

func (e *Executor) statusJSON(id, status, message string) map[string]interface{} {
	out := map[string]interface{}{"traceId": id, "status": status, "startedAt": rfc3339(e.startedAt), "rememberedSince": rfc3339(e.rememberedSince)}
	if message != "" {
		out["message"] = message
	}
	return out
}

func (e *Executor) status(id string) (int, interface{}) {
	e.mu.Lock()
	defer e.mu.Unlock()
	en := e.entries[id]
	switch {
	case en == nil:
		return http.StatusNotFound, e.statusJSON(id, "UNKNOWN", "")
	case en.result == nil:
		return http.StatusOK, e.statusJSON(id, "RUNNING", "")
	default:
		return http.StatusOK, e.statusJSON(id, en.result.FinalStatus(), en.result.Message)
	}
}

func (e *Executor) cancelExecution(id string) (int, interface{}) {
	e.mu.Lock()
	en := e.entries[id]
	if en == nil {
		// The cancel overtook its call: remembered, and the call never runs.
		en = newEntry("")
		e.entries[id] = en
		e.finishLocked(id, en, cancelled())
		e.mu.Unlock()
		return http.StatusOK, e.statusJSON(id, "CANCELLED", "")
	}
	e.mu.Unlock()
	e.askStop(en, cancelled())
	select {
	case <-en.finished:
		return e.status(id)
	case <-time.After(e.stopWait + time.Second):
		return http.StatusOK, e.statusJSON(id, "RUNNING", "")
	}
}

func (e *Executor) askStop(en *entry, reason Result) {
	e.mu.Lock()
	if en.stopReason == nil {
		en.stopReason = &reason
	}
	e.mu.Unlock()
	en.stopOnce.Do(func() { close(en.stopAsked) })
	en.cancel()
}

func (e *Executor) call(caller context.Context, name, path string, h http.Header, body []byte) (int, interface{}) {
	traceID := h.Get("X-Trace-Id")
	if !e.signed(http.MethodPost, path, h, traceID, body) {
		return http.StatusUnauthorized, Failure("missing or wrong signature")
	}
	c, err := ParseCall(body)
	if err != nil {
		return http.StatusBadRequest, Failure("not a JobFlow call: " + err.Error())
	}
	reg, ok := e.handlers[name]
	if !ok {
		return http.StatusNotFound, Failure("no handler " + name)
	}
	e.mu.Lock()
	if known := e.entries[c.TraceID]; known != nil {
		defer e.mu.Unlock()
		if known.result != nil {
			return http.StatusOK, e.withLog(c.TraceID, *known.result)
		}
		// Repeated while the first run goes on: its result goes to the latest caller.
		known.reportURL, known.reportWhenDone = c.ReportURL, true
		return http.StatusAccepted, OK("running")
	}
	en := newEntry(c.ReportURL)
	en.reportWhenDone = reg.background
	ctx, cancel := context.WithCancel(context.Background())
	en.cancel = cancel
	e.entries[c.TraceID] = en
	e.mu.Unlock()
	var lc *capture
	if e.logBound > 0 {
		lc = newCapture(e.logBound)
		if target := logURL(c.ReportURL); target != "" {
			go e.shipLog(target, c.TraceID, lc)
		}
	}
	go e.supervise(&Context{Context: ctx, Call: c, log: lc}, reg, en)
	if reg.background {
		return http.StatusAccepted, OK("accepted")
	}
	select {
	case <-en.finished:
	case <-en.stuck:
	case <-caller.Done():
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if en.result != nil {
		return http.StatusOK, e.withLog(c.TraceID, *en.result)
	}
	// Still running: too slow to stop (the scheduler waits for the report), or the caller hung
	// up (nobody reads the answer; the result is reported).
	en.reportWhenDone = true
	return http.StatusAccepted, OK("running")
}

func (e *Executor) run(ctx *Context, fn HandlerFunc) (res Result) {
	defer func() {
		if p := recover(); p != nil {
			e.logger.Printf("jobflow executor: handler %s panicked: %v (trace_id=%s)", ctx.Handler, p, ctx.TraceID)
			res = Failure(fmt.Sprintf("handler panicked: %v", p))
		}
	}()
	message, err := fn(ctx)
	if err != nil {
		if re, ok := err.(ResultError); ok {
			return re.Result
		}
		return Failure(err.Error())
	}
	return OK(message)
}

func (e *Executor) supervise(ctx *Context, reg registered, en *entry) {
	done := make(chan Result, 1)
	go func() { done <- e.run(ctx, reg.fn) }()
	var timeout <-chan time.Time
	if ctx.TimeoutSeconds > 0 {
		t := time.NewTimer(time.Duration(ctx.TimeoutSeconds) * time.Second)
		defer t.Stop()
		timeout = t.C
	}
	var result Result
	select {
	case result = <-done:
		select {
		case <-en.stopAsked:
			// Returned once asked to stop: the stop decides the outcome.
			e.mu.Lock()
			result = *en.stopReason
			e.mu.Unlock()
		default:
		}
	case <-en.stopAsked:
		result = e.waitStopped(ctx, en, done)
	case <-timeout:
		result = e.waitStopped(ctx, en, done)
	}
	if ctx.log != nil {
		ctx.log.end()
		// The rest of the log goes with the result, and is remembered a while for a repeated
		// call (a scheduler that stopped before storing the answer calls again).
		e.mu.Lock()
		ships := logURL(en.reportURL) != ""
		e.mu.Unlock()
		if ships {
			encoded, _ := json.Marshal(result)
			if rest := ctx.log.takeRest(carryRoom(len(encoded))); rest != nil {
				e.carried.keep(ctx.TraceID, rest)
			}
		}
	}
	e.mu.Lock()
	e.finishLocked(ctx.TraceID, en, result)
	report, url := en.reportWhenDone, en.reportURL
	e.mu.Unlock()
	if report {
		e.Report(url, ctx.TraceID, result)
	}
}

// waitStopped stops the handler (its context is done) and waits for it; the stop's reason is
// the outcome.
func (e *Executor) waitStopped(ctx *Context, en *entry, done chan Result) Result {
	e.askStop(en, timedOut(ctx.TimeoutSeconds))
	select {
	case <-done:
	case <-time.After(e.stopWait):
		e.logger.Printf("jobflow executor: handler %s did not stop within %s; reported RUNNING until it returns (trace_id=%s)", ctx.Handler, e.stopWait, ctx.TraceID)
		close(en.stuck)
		<-done
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return *en.stopReason
}

// finishLocked records the result and forgets the oldest-finished executions beyond the
// memory's bounds. Holds e.mu.
func (e *Executor) finishLocked(id string, en *entry, result Result) {
	en.result = &result
	close(en.finished)
	now := time.Now()
	e.finished = append(e.finished, finishedAt{id, now})
	for len(e.finished) > 0 {
		oldest := e.finished[0]
		tooMany := len(e.finished) > e.keepMost
		overCount := len(e.finished) > e.keepLeast
		if !(tooMany || (overCount && now.Sub(oldest.at) > e.keepFor)) {
			break
		}
		e.finished = e.finished[1:]
		delete(e.entries, oldest.traceID)
		if oldest.at.After(e.rememberedSince) {
			e.rememberedSince = oldest.at
		}
	}
}

// Report POSTs result to reportURL, signed; retried with backoff on no answer or a 5xx, stopped
// at any other answer. True when the scheduler took it (200) or had it settled (409).
func (e *Executor) Report(reportURL, traceID string, result Result) bool {
	if reportURL == "" {
		return false
	}
	body, _ := json.Marshal(e.withLog(traceID, result))
	for attempt := 0; attempt < e.attempts; attempt++ {
		if status := e.postSigned(reportURL, traceID, body); status > 0 && status < 500 {
			if status != 200 && status != 409 {
				e.logger.Printf("jobflow executor: report of %s refused with %d", traceID, status)
			}
			return status == 200 || status == 409
		}
		backoff := time.Duration(1<<attempt) * time.Second
		if backoff > 30*time.Second {
			backoff = 30 * time.Second
		}
		time.Sleep(backoff)
	}
	e.logger.Printf("jobflow executor: report of %s not delivered after %d attempts", traceID, e.attempts)
	return false
}

// withLog is result with the rest of traceID's log when it carries one.
func (e *Executor) withLog(traceID string, result Result) withLog {
	return withLog{result, e.carried.get(traceID)}
}

// postSigned POSTs body to target for traceID, signed when the executor has a secret; the
// answer's status, or 0 when none came.
func (e *Executor) postSigned(target, traceID string, body []byte) int {
	u, err := url.Parse(target)
	if err != nil {
		return 0
	}
	req, _ := http.NewRequest(http.MethodPost, target, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Trace-Id", traceID)
	if e.secret != nil {
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		req.Header.Set("X-JobFlow-Timestamp", ts)
		req.Header.Set("X-JobFlow-Signature", Sign(e.secret, http.MethodPost, u.EscapedPath(), ts, traceID, body))
	}
	resp, err := e.httpClient.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
