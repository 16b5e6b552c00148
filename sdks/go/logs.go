package executor

// What a handler logs, captured per execution and shipped to the scheduler
// (docs/executor-protocol.md, "Shipping logs").
//
// A handler logs through its context: ctx.Log(level, format, args...), or ctx.Logger(), a
// *log.Logger whose lines are INFO. Each execution keeps at most its bound (1 MiB by default,
// WithLogBound) of messages; what comes beyond is counted, and a last line says how much was
// dropped. A goroutine per execution ships what was logged every second while the handler
// runs (the first batch a second after the start), in order, each line numbered so a batch sent again after a lost answer is stored
// once. When the handler has finished, the rest goes with the result (takeRest): in the
// answer to the call or in the result report, which the executor sends anyway, so a handler
// that logs a few lines costs no request of its own. Only a rest past carryBytes is shipped
// on its own, with the log's end. A failed batch is sent again with a growing wait, for up to
// ten minutes after the end. A handler that logged nothing sends nothing. Logging appends to
// a buffer under a short lock: a handler never waits for its log.

import (
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Log levels of ctx.Log.
const (
	Trace = "TRACE"
	Debug = "DEBUG"
	Info  = "INFO"
	Warn  = "WARN"
	Error = "ERROR"
)

// DefaultLogBound is how many bytes of log messages an execution keeps by default.
const DefaultLogBound = 1024 * 1024

const (
	shipEvery   = time.Second
	retryAtMost = 30 * time.Second
	giveUpAfter = 10 * time.Minute
	batchLines  = 500
	// batchBytes bounds the serialised lines of a batch: the scheduler takes bodies of at most
	// 1 MiB, and one line (16,384 characters, escaped) always fits.
	batchBytes = 512 * 1024
	lineChars  = 16 * 1024
	// carryBytes bounds the serialised lines a result carries.
	carryBytes = 32 * 1024
	// answerBytes bounds a result and the lines it carries together: the scheduler reads
	// 64 KiB of an answer, and a cut answer is not a result.
	answerBytes = 48 * 1024
	// carriedMemory bounds the carried logs remembered for repeated calls.
	carriedMemory = 8 * 1024 * 1024
)

// WithLogBound sets how many bytes of log messages each execution keeps and ships (0: none).
func WithLogBound(bytes int) Option { return func(e *Executor) { e.logBound = bytes } }

type logLine struct {
	Seq     int64  `json:"seq"`
	At      string `json:"at"`
	Level   string `json:"level"`
	Message string `json:"message"`
}

type logEnd struct {
	Lines        int64 `json:"lines"`
	DroppedBytes int64 `json:"droppedBytes"`
}

// capture is one execution's log: appended to by the handler, drained by its shipper.
type capture struct {
	bound   int
	mu      sync.Mutex
	pending []logLine
	seq     int64
	kept    int
	dropped int
	ended   bool
	carried bool // the rest went with the result: the shipper stops
	// sending: a batch is on its way; the rest is not taken meanwhile, since two batches
	// stored at once could both hold a line.
	sending bool
	wake    chan struct{}
}

// carriedLog is the rest of a log, carried in a result's logs field.
type carriedLog struct {
	Lines []logLine `json:"lines"`
	End   logEnd    `json:"end"`
	bytes int
}

// takeRest is the rest of an ended log, to go with the result: every line not yet taken by
// the scheduler, and the end. Nil when it is more than most bytes serialised or while a batch
// is on its way (the shipper sends it then), or when nothing was logged (nothing is sent).
// Once taken, the shipper stops: batches never overlap in flight.
func (c *capture) takeRest(most int) *carriedLog {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ended || c.carried || c.sending {
		return nil
	}
	if c.seq == 0 {
		c.carried = true
		return nil
	}
	if len(c.pending) > batchLines {
		return nil
	}
	b, _ := json.Marshal(c.pending)
	if len(b) > most {
		return nil
	}
	rest := &carriedLog{Lines: append([]logLine(nil), c.pending...),
		End: logEnd{Lines: c.seq, DroppedBytes: int64(c.dropped)}, bytes: len(b)}
	c.carried = true
	c.pending = nil
	return rest
}

// carryRoom is how many bytes of lines a result of resultBytes (serialised) may carry.
func carryRoom(resultBytes int) int {
	room := answerBytes - resultBytes
	if room > carryBytes {
		room = carryBytes
	}
	if room < 0 {
		return 0
	}
	return room
}

// beginSend marks a batch on its way: false when the rest went with the result meanwhile
// (nothing is sent then).
func (c *capture) beginSend() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sending = !c.carried
	return c.sending
}

func (c *capture) endSend() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sending = false
}

func (c *capture) isEnded() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ended
}

func (c *capture) isCarried() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.carried
}

// carriedLogs remembers the logs carried lately, by trace id, within a byte budget, oldest
// forgotten first: a scheduler that took an answer and stopped before storing it calls again,
// and the repeated call's answer carries the log again.
type carriedLogs struct {
	mu     sync.Mutex
	budget int
	bytes  int
	logs   map[string]*carriedLog
	order  []string
}

func newCarriedLogs(budget int) *carriedLogs {
	return &carriedLogs{budget: budget, logs: map[string]*carriedLog{}}
}

func (m *carriedLogs) keep(traceID string, rest *carriedLog) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.logs[traceID]; ok {
		return
	}
	m.logs[traceID] = rest
	m.order = append(m.order, traceID)
	m.bytes += rest.bytes
	for m.bytes > m.budget && len(m.order) > 0 {
		old := m.order[0]
		m.order = m.order[1:]
		m.bytes -= m.logs[old].bytes
		delete(m.logs, old)
	}
}

func (m *carriedLogs) get(traceID string) *carriedLog {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.logs[traceID]
}

// withLog is a result as sent: with the rest of its execution's log when it carries one.
type withLog struct {
	Result
	Logs *carriedLog `json:"logs,omitempty"`
}

func newCapture(bound int) *capture {
	return &capture{bound: bound, wake: make(chan struct{}, 1)}
}

func (c *capture) push(level, message string) {
	if c == nil {
		return
	}
	if len(message) > lineChars {
		message = message[:lineChars]
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return
	}
	if c.kept+len(message) > c.bound {
		c.dropped += len(message)
		return
	}
	c.kept += len(message)
	c.seq++
	c.pending = append(c.pending, logLine{c.seq, time.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00"), level, message})
}

func (c *capture) end() {
	c.mu.Lock()
	if c.dropped > 0 {
		c.seq++
		c.pending = append(c.pending, logLine{c.seq, time.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00"), Warn,
			fmt.Sprintf("%d bytes of log dropped: past this execution's bound of %d bytes", c.dropped, c.bound)})
	}
	c.ended = true
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// next is the next batch to send (kept until shipped), and the end when it goes with it.
func (c *capture) next() ([]logLine, *logEnd, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var lines []logLine
	size := 0
	for _, l := range c.pending {
		b, _ := json.Marshal(l)
		size += len(b)
		if len(lines) == batchLines || (size > batchBytes && len(lines) > 0) {
			break
		}
		lines = append(lines, l)
	}
	var end *logEnd
	if c.ended && len(lines) == len(c.pending) {
		end = &logEnd{Lines: c.seq, DroppedBytes: int64(c.dropped)}
	}
	return lines, end, c.ended
}

func (c *capture) shipped(through int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := 0
	for i < len(c.pending) && c.pending[i].Seq <= through {
		i++
	}
	c.pending = c.pending[i:]
}

// Log adds a line to this execution's log (level: Trace, Debug, Info, Warn or Error).
func (c *Context) Log(level, format string, args ...interface{}) {
	c.log.push(level, fmt.Sprintf(format, args...))
}

// Logger is a *log.Logger writing INFO lines into this execution's log.
func (c *Context) Logger() *log.Logger {
	return log.New(logWriter{c.log}, "", 0)
}

type logWriter struct{ c *capture }

func (w logWriter) Write(p []byte) (int, error) {
	w.c.push(Info, strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// logURL is where an execution's log goes: beside its reportUrl (…/result → …/logs).
func logURL(reportURL string) string {
	if strings.HasSuffix(reportURL, "/result") {
		return strings.TrimSuffix(reportURL, "/result") + "/logs"
	}
	return ""
}

// spreadOf is how long the last batch of traceID waits after its execution's end: spread
// over shipEvery by a hash of the trace id (FNV-1a, as every JobFlow SDK does).
func spreadOf(traceID string) time.Duration {
	h := uint64(0xcbf29ce484222325)
	for i := 0; i < len(traceID); i++ {
		h = (h ^ uint64(traceID[i])) * 0x100000001b3
	}
	return shipEvery * time.Duration(h%1000) / 1000
}

// shipLog sends c to target until its end has been taken (or given up on).
func (e *Executor) shipLog(target, traceID string, c *capture) {
	failures := 0
	var endedAt time.Time
	spread := false
	// The first batch waits a period (or the end): a handler that ends within it sends its
	// whole log with its result.
	if !c.isEnded() {
		select {
		case <-c.wake:
		case <-time.After(shipEvery):
		}
	}
	for {
		if c.isCarried() {
			return
		}
		lines, end, ended := c.next()
		if ended && endedAt.IsZero() {
			endedAt = time.Now()
		}
		if end != nil && end.Lines == 0 {
			return // nothing was logged: nothing is sent
		}
		if end != nil && !spread {
			// Executions that end together would ship their last batches together, in the
			// scheduler's busiest moment: the last batch waits a share of a second.
			spread = true
			time.Sleep(spreadOf(traceID))
			continue
		}
		if len(lines) == 0 && end == nil {
			select {
			case <-c.wake:
			case <-time.After(shipEvery):
			}
			continue
		}
		body, _ := json.Marshal(struct {
			Lines []logLine `json:"lines"`
			End   *logEnd   `json:"end,omitempty"`
		}{lines, end})
		if !c.beginSend() {
			return
		}
		status := e.postSigned(target, traceID, body)
		c.endSend()
		switch {
		case status == http.StatusOK:
			failures = 0
			if len(lines) > 0 {
				c.shipped(lines[len(lines)-1].Seq)
			}
			if end != nil {
				return
			}
			if !ended {
				select {
				case <-c.wake:
				case <-time.After(shipEvery):
				}
			}
		case status >= 400 && status < 500:
			e.logger.Printf("jobflow executor: log of %s refused with %d; dropped", traceID, status)
			return
		default:
			if ended && time.Since(endedAt) > giveUpAfter {
				e.logger.Printf("jobflow executor: log of %s could not be shipped; dropped", traceID)
				return
			}
			failures++
			wait := time.Duration(250<<uint(minInt(failures, 10))) * time.Millisecond
			if wait > retryAtMost {
				wait = retryAtMost
			}
			time.Sleep(wait)
		}
	}
}

func minInt(a, b int) int {
	if a < b {
		return a
	}
	return b
}
