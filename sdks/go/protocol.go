// Package executor runs JobFlow job handlers behind an http.Handler (docs/executors/go.md): the
// executor protocol of docs/executor-protocol.md around handlers that are plain functions of a
// context.
package executor

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

// MaxSkew is how far a signature's timestamp may be from the executor's clock.
const MaxSkew = 300 * time.Second

// Sign returns the X-JobFlow-Signature value of a request or report: "v1=" and the hex
// HMAC-SHA256 of "METHOD\npath\ntimestamp\ntraceId\n" followed by the exact body.
func Sign(secret []byte, method, path, timestamp, traceID string, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	fmt.Fprintf(mac, "%s\n%s\n%s\n%s\n", method, path, timestamp, traceID)
	mac.Write(body)
	return "v1=" + hex.EncodeToString(mac.Sum(nil))
}

// Verify reports whether a request is signed with secret within MaxSkew of now, comparing in
// constant time.
func Verify(secret []byte, method, path string, header http.Header, traceID string, body []byte, now time.Time) bool {
	timestamp := header.Get("X-JobFlow-Timestamp")
	signature := header.Get("X-JobFlow-Signature")
	if timestamp == "" || signature == "" {
		return false
	}
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return false
	}
	if math.Abs(float64(now.Unix()-ts)) > MaxSkew.Seconds() {
		return false
	}
	expected := Sign(secret, method, path, timestamp, traceID, body)
	return hmac.Equal([]byte(expected), []byte(signature))
}

// DataRange is the slice of a RANGE job's data range one execution owns.
type DataRange struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
}

// Call is the body of a call (docs/executor-protocol.md §1).
type Call struct {
	TraceID        string            `json:"traceId"`
	ExecutionID    string            `json:"executionId"`
	JobName        string            `json:"jobName"`
	Handler        string            `json:"handler"`
	TriggerType    string            `json:"triggerType"`
	FireTime       time.Time         `json:"fireTime"`
	ShardStart     int               `json:"shardStart"`
	ShardEnd       int               `json:"shardEnd"`
	ShardCount     int               `json:"shardCount"`
	ShardStrategy  string            `json:"shardStrategy"`
	RetryCount     int               `json:"retryCount"`
	TimeoutSeconds int               `json:"timeoutSeconds"`
	JobParams      json.RawMessage   `json:"jobParams"`
	DataRange      *DataRange        `json:"dataRange,omitempty"`
	ShardItems     map[string]string `json:"shardItems,omitempty"`
	ReportURL      string            `json:"reportUrl"`
}

// ParseCall reads a call's JSON body; an error when it is not one.
func ParseCall(body []byte) (Call, error) {
	var c Call
	if err := json.Unmarshal(body, &c); err != nil {
		return c, err
	}
	if c.TraceID == "" || c.ExecutionID == "" || c.JobName == "" || c.FireTime.IsZero() {
		return c, errors.New("missing traceId, executionId, jobName or fireTime")
	}
	return c, nil
}

// Result is a JobResult (docs/executor-protocol.md §2).
type Result struct {
	Success bool   `json:"success"`
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
}

// OK is a success with a message.
func OK(message string) Result { return Result{Success: true, Message: message} }

// Failure is a failure with a message: FAILED, retried while retries are left.
func Failure(message string) Result { return Result{Success: false, Message: message} }

func timedOut(seconds int) Result {
	return Result{Status: "TIMEOUT", Message: fmt.Sprintf("aborted after %ds (timeoutSeconds)", seconds)}
}

func cancelled() Result {
	return Result{Status: "CANCELLED", Message: "cancelled by the scheduler"}
}

// FinalStatus is the status the execution ends in.
func (r Result) FinalStatus() string {
	switch r.Status {
	case "SUCCESS", "FAILED", "TIMEOUT", "CANCELLED":
		return r.Status
	}
	if r.Success {
		return "SUCCESS"
	}
	return "FAILED"
}
