package executor

// Per-execution logs: what a handler logs reaches the scheduler's log endpoint in order,
// signed, with the end; the bound drops and says so; a handler that logs nothing sends nothing.

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

type logBatch struct {
	Lines []logLine `json:"lines"`
	End   *logEnd   `json:"end"`
}

type logScheduler struct {
	mu      sync.Mutex
	batches []logBatch
	signed  bool
	srv     *httptest.Server
}

func newLogScheduler(t *testing.T) *logScheduler {
	s := &logScheduler{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var b logBatch
		_ = json.Unmarshal(body, &b)
		ok := Verify([]byte(secret), r.Method, r.URL.EscapedPath(), r.Header, r.Header.Get("X-Trace-Id"), body, time.Now())
		s.mu.Lock()
		if strings.HasSuffix(r.URL.Path, "/logs") {
			s.batches = append(s.batches, b)
			s.signed = ok
		}
		s.mu.Unlock()
		w.WriteHeader(200)
		_, _ = w.Write([]byte("{}"))
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *logScheduler) report(trace string) string {
	return s.srv.URL + "/api/v1/jobs/executions/" + trace + "/result"
}

func (s *logScheduler) ended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.batches) > 0 && s.batches[len(s.batches)-1].End != nil
}

func TestWhatAHandlerLogsGoesWithTheAnswerInOrderWithTheEnd(t *testing.T) {
	s := newLogScheduler(t)
	ex := New(secret, quiet())
	ex.Handle("work", func(ctx *Context) (string, error) {
		ctx.Log(Info, "loading %d orders", 300)
		ctx.Logger().Printf("order %d skipped", 17)
		ctx.Log(Error, "order 42 failed")
		return "done", nil
	})
	body := callBody("l1", 30, map[string]interface{}{"reportUrl": s.report("l1")})
	rec := signed(ex, "POST", "/internal/job/work", "l1", body)
	if rec.Code != 200 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	var answer struct {
		Success bool     `json:"success"`
		Logs    logBatch `json:"logs"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range answer.Logs.Lines {
		got = append(got, strings.Join([]string{l.Level, l.Message}, " "))
	}
	want := []string{"INFO loading 300 orders", "INFO order 17 skipped", "ERROR order 42 failed"}
	if !answer.Success || strings.Join(got, "|") != strings.Join(want, "|") || answer.Logs.End == nil || *answer.Logs.End != (logEnd{3, 0}) {
		t.Fatalf("answer %s", rec.Body)
	}
	// A repeated call after the end carries the log again; nothing went on its own.
	again := signed(ex, "POST", "/internal/job/work", "l1", body)
	time.Sleep(1500 * time.Millisecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	if again.Body.String() != rec.Body.String() || len(s.batches) != 0 {
		t.Fatalf("again %s, batches %d", again.Body, len(s.batches))
	}
}

func TestTheRestStaysWithTheShipperWhileABatchIsOnItsWay(t *testing.T) {
	c := newCapture(DefaultLogBound)
	c.push(Info, "loading")
	if !c.beginSend() {
		t.Fatal("begin")
	}
	c.end()
	if c.takeRest(carryBytes) != nil {
		t.Fatal("taken while a batch is on its way")
	}
	c.endSend()
	if rest := c.takeRest(carryBytes); rest == nil || len(rest.Lines) != 1 {
		t.Fatal("not taken once the batch is answered")
	}
	if c.beginSend() {
		t.Fatal("the shipper goes on after the rest was taken")
	}
}

func TestALongResultLeavesItsLogToTheShipper(t *testing.T) {
	if carryRoom(40) != carryBytes || carryRoom(answerBytes-100) != 100 || carryRoom(60*1024) != 0 {
		t.Fatal("carry room")
	}
	c := newCapture(DefaultLogBound)
	c.push(Info, "done")
	c.end()
	if c.takeRest(carryRoom(60*1024)) != nil || c.isCarried() {
		t.Fatal("a long result carried its log")
	}
}

func TestARestPastTheCarryBoundIsShippedOnItsOwnSignedWithTheEnd(t *testing.T) {
	s := newLogScheduler(t)
	ex := New(secret, quiet())
	ex.Handle("work", func(ctx *Context) (string, error) {
		for i := 0; i < 3; i++ {
			ctx.Log(Info, "%s", strings.Repeat("x", lineChars))
		}
		return "done", nil
	})
	rec := signed(ex, "POST", "/internal/job/work", "v1", callBody("v1", 30, map[string]interface{}{"reportUrl": s.report("v1")}))
	if rec.Code != 200 || strings.Contains(rec.Body.String(), "logs") {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !s.ended() {
		if time.Now().After(deadline) {
			t.Fatal("no end shipped")
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	lines := 0
	for _, b := range s.batches {
		lines += len(b.Lines)
	}
	if lines != 3 || *s.batches[len(s.batches)-1].End != (logEnd{3, 0}) || !s.signed {
		t.Fatalf("lines %d end %+v signed %v", lines, s.batches[len(s.batches)-1].End, s.signed)
	}
}

func TestAHandlerThatLogsNothingSendsNothing(t *testing.T) {
	s := newLogScheduler(t)
	ex := New(secret, quiet())
	ex.Handle("work", func(ctx *Context) (string, error) { return "done", nil })
	signed(ex, "POST", "/internal/job/work", "q1", callBody("q1", 30, map[string]interface{}{"reportUrl": s.report("q1")}))
	time.Sleep(1500 * time.Millisecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.batches) != 0 {
		t.Fatalf("batches %v", s.batches)
	}
}

func TestPastItsBoundAnExecutionCountsWhatItDroppedAndSaysSoLast(t *testing.T) {
	c := newCapture(10)
	for _, m := range []string{"12345", "123456", "12345"} {
		c.push(Info, m)
	}
	c.end()
	c.push(Info, "after the end")
	lines, end, _ := c.next()
	var got []string
	for _, l := range lines {
		got = append(got, l.Message)
	}
	want := "12345|12345|6 bytes of log dropped: past this execution's bound of 10 bytes"
	if strings.Join(got, "|") != want || *end != (logEnd{3, 6}) {
		t.Fatalf("got %v end %+v", got, end)
	}
}

func TestABatchStaysUnderTheSchedulersBodyLimitWhateverItsLines(t *testing.T) {
	// The whole 1 MiB bound logged at once, in long lines that JSON escapes six-fold.
	c := newCapture(DefaultLogBound)
	for i := 0; i < 64; i++ {
		c.push("INFO", strings.Repeat("\x01", lineChars))
	}
	c.end()
	shipped := 0
	for shipped < 64 {
		lines, end, _ := c.next()
		body, _ := json.Marshal(logBatch{Lines: lines, End: end})
		if len(body) >= 1024*1024 {
			t.Fatalf("a batch of %d bytes", len(body))
		}
		shipped += len(lines)
		c.shipped(lines[len(lines)-1].Seq)
	}
	if shipped != 64 {
		t.Fatalf("shipped %d lines", shipped)
	}
}

func TestTheLastBatchWaitsAShareOfASecondSetByTheTraceID(t *testing.T) {
	// The same vector in every SDK: the spread is the FNV-1a hash of the trace id.
	if got := spreadOf("4bf92f3577b34da6a3ce929d0e0e4736"); got != 618*time.Millisecond {
		t.Fatalf("spread %v", got)
	}
	if got := spreadOf("a"); got != 996*time.Millisecond {
		t.Fatalf("spread %v", got)
	}
}
