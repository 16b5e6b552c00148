package executor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const secret = "s3cret"

func TestTheSignatureOfTheProtocolExample(t *testing.T) {
	body := []byte(`{"traceId":"4bf92f3577b34da6a3ce929d0e0e4736","jobName":"order-sync"}`)
	want := "v1=a2d5a056476b16333e35d275ad4d8d0d8476492edb2e89cebf24a7ba34ca13f2"
	if got := Sign([]byte(secret), "POST", "/internal/job/syncOrders", "1700000000", "4bf92f3577b34da6a3ce929d0e0e4736", body); got != want {
		t.Fatalf("signature %s, want %s", got, want)
	}
	h := http.Header{}
	h.Set("X-JobFlow-Timestamp", "1700000000")
	h.Set("X-JobFlow-Signature", want)
	at := func(s int64) time.Time { return time.Unix(s, 0) }
	trace := "4bf92f3577b34da6a3ce929d0e0e4736"
	if !Verify([]byte(secret), "POST", "/internal/job/syncOrders", h, trace, body, at(1700000000+300)) {
		t.Error("a signature 300 s old is accepted")
	}
	if Verify([]byte(secret), "POST", "/internal/job/syncOrders", h, trace, body, at(1700000000+301)) {
		t.Error("a signature 301 s old is refused")
	}
	if Verify([]byte("other"), "POST", "/internal/job/syncOrders", h, trace, body, at(1700000000)) {
		t.Error("another secret is refused")
	}
	if Verify([]byte(secret), "POST", "/internal/job/other", h, trace, body, at(1700000000)) {
		t.Error("another path is refused")
	}
	if Verify([]byte(secret), "POST", "/internal/job/syncOrders", http.Header{}, trace, body, at(1700000000)) {
		t.Error("an unsigned call is refused")
	}
}

func callBody(trace string, timeout int, extra map[string]interface{}) []byte {
	b := map[string]interface{}{
		"traceId": trace, "executionId": "job:20260101020000:2-3", "jobName": "job", "handler": "work",
		"triggerType": "CRON", "fireTime": "2026-01-01T02:00:00Z", "shardStart": 2, "shardEnd": 3,
		"shardCount": 4, "shardStrategy": "RANGE", "retryCount": 1, "timeoutSeconds": timeout,
		"jobParams": map[string]int{"batch": 5}, "dataRange": map[string]int{"start": 51, "end": 100},
		"reportUrl": "",
	}
	for k, v := range extra {
		b[k] = v
	}
	out, _ := json.Marshal(b)
	return out
}

func TestTheCallParsedIntoTheContext(t *testing.T) {
	c, err := ParseCall(callBody("t1", 30, map[string]interface{}{"shardItems": map[string]string{"2": "Shanghai"}}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := &Context{Call: c}
	var owned []uint64
	for i := uint64(0); i < 8; i++ {
		if ctx.OwnsID(i) {
			owned = append(owned, i)
		}
	}
	if fmt.Sprint(owned) != "[2 3 6 7]" || fmt.Sprint(ctx.Shards()) != "[2 3]" {
		t.Errorf("owned %v, shards %v", owned, ctx.Shards())
	}
	var p struct{ Batch int }
	if err := ctx.Params(&p); err != nil || p.Batch != 5 {
		t.Errorf("params %+v %v", p, err)
	}
	if !c.FireTime.Equal(time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC)) || c.DataRange.End != 100 || c.ShardItems["2"] != "Shanghai" {
		t.Errorf("call %+v", c)
	}
	if _, err := ParseCall([]byte(`{"traceId":"x"}`)); err == nil {
		t.Error("a body that is not a call is refused")
	}
}

func signed(ex *Executor, method, path, trace string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req.Header.Set("X-Trace-Id", trace)
	req.Header.Set("X-JobFlow-Timestamp", ts)
	req.Header.Set("X-JobFlow-Signature", Sign([]byte(secret), method, path, ts, trace, body))
	rec := httptest.NewRecorder()
	ex.ServeHTTP(rec, req)
	return rec
}

func decode(t *testing.T, rec *httptest.ResponseRecorder) map[string]interface{} {
	var out map[string]interface{}
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("answer %q: %v", rec.Body.String(), err)
	}
	return out
}

func quiet() Option { return WithLogger(log.New(io.Discard, "", 0)) }

func TestARepeatedCallRunsTheHandlerOnce(t *testing.T) {
	ex := New(secret, quiet())
	var runs int32
	ex.Handle("work", func(ctx *Context) (string, error) {
		return fmt.Sprintf("run %d", atomic.AddInt32(&runs, 1)), nil
	})
	first := signed(ex, "POST", "/internal/job/work", "t1", callBody("t1", 30, nil))
	second := signed(ex, "POST", "/internal/job/work", "t1", callBody("t1", 30, nil))
	if first.Code != 200 || first.Body.String() != second.Body.String() || runs != 1 {
		t.Fatalf("%d %s / %s, runs %d", first.Code, first.Body, second.Body, runs)
	}
}

func TestAHandlerThatHonoursItsContextStopsAtTheTimeout(t *testing.T) {
	ex := New(secret, quiet())
	ex.Handle("work", func(ctx *Context) (string, error) {
		select {
		case <-time.After(5 * time.Second):
			return "too late", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	began := time.Now()
	rec := signed(ex, "POST", "/internal/job/work", "t1", callBody("t1", 1, nil))
	got := decode(t, rec)
	if rec.Code != 200 || got["status"] != "TIMEOUT" || got["success"] != false || time.Since(began) > 3*time.Second {
		t.Fatalf("%d %v after %s", rec.Code, got, time.Since(began))
	}
}

func TestAHandlerThatIgnoresItsContextIsReportedRunningUntilItReturns(t *testing.T) {
	ex := New(secret, quiet(), WithStopWait(300*time.Millisecond))
	release := make(chan struct{})
	ex.Handle("work", func(ctx *Context) (string, error) {
		<-release
		return "finished anyway", nil
	})
	rec := signed(ex, "POST", "/internal/job/work", "t1", callBody("t1", 1, nil))
	if rec.Code != 202 {
		t.Fatalf("past its timeout and not stopped: %d %s, want 202", rec.Code, rec.Body)
	}
	if s := decode(t, signed(ex, "GET", "/internal/job/status/t1", "t1", nil))["status"]; s != "RUNNING" {
		t.Errorf("status %v, want RUNNING", s)
	}
	if s := decode(t, signed(ex, "POST", "/internal/job/cancel/t1", "t1", nil))["status"]; s != "RUNNING" {
		t.Errorf("cancel %v, want RUNNING", s)
	}
	close(release)
	deadline := time.Now().Add(2 * time.Second)
	for decode(t, signed(ex, "GET", "/internal/job/status/t1", "t1", nil))["status"] == "RUNNING" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if s := decode(t, signed(ex, "GET", "/internal/job/status/t1", "t1", nil))["status"]; s != "TIMEOUT" {
		t.Errorf("status %v, want TIMEOUT", s)
	}
}

func TestFinishedExecutionsAreForgottenByAgeAndCountNeverRunningOnes(t *testing.T) {
	ex := New(secret, quiet(), WithKeep(2, 0, 4))
	release := make(chan struct{})
	ex.Handle("work", func(ctx *Context) (string, error) {
		if ctx.TraceID == "running" {
			<-release
		}
		return "done", nil
	})
	go signed(ex, "POST", "/internal/job/work", "running", callBody("running", 30, nil))
	for signed(ex, "GET", "/internal/job/status/running", "running", nil).Code != 200 {
		time.Sleep(time.Millisecond)
	}
	for _, id := range []string{"a", "b", "c"} {
		signed(ex, "POST", "/internal/job/work", id, callBody(id, 30, nil))
		time.Sleep(2 * time.Millisecond)
	}
	for id, want := range map[string]int{"a": 404, "b": 200, "c": 200, "running": 200} {
		if got := signed(ex, "GET", "/internal/job/status/"+id, id, nil).Code; got != want {
			t.Errorf("status of %s: %d, want %d", id, got, want)
		}
	}
	close(release)
}

func TestMountedInAServeMuxUnsignedCallsRefused(t *testing.T) {
	ex := New(secret, quiet())
	ex.Handle("work", func(ctx *Context) (string, error) { return "ok", nil })
	mux := http.NewServeMux()
	mux.Handle("/internal/job/", ex)
	mux.HandleFunc("/orders", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(418) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/internal/job/work", "application/json", strings.NewReader(string(callBody("t1", 30, nil))))
	if err != nil || resp.StatusCode != 401 {
		t.Fatalf("unsigned: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = http.Get(srv.URL + "/orders")
	if err != nil || resp.StatusCode != 418 {
		t.Fatalf("the application's own route: %v %v", resp, err)
	}
	resp.Body.Close()
}
