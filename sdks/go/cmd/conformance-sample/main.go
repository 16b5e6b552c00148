// The Go SDK's sample for the conformance suite (conformance/README.md): the handlers every
// SDK's sample serves, on 127.0.0.1:$JOBFLOW_CONFORMANCE_PORT, accepting only calls signed with
// $JOBFLOW_SIGNING_SECRET.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"log"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	executor "jobflow/executor"
)

type sleepParams struct {
	Millis  int    `json:"millis"`
	Witness string `json:"witness"`
}

// sleepThenWitness waits jobParams.millis unless stopped; a handler that was not stopped then
// tells jobParams.witness.
func sleepThenWitness(ctx *executor.Context) error {
	var p sleepParams
	_ = ctx.Params(&p)
	select {
	case <-time.After(time.Duration(p.Millis) * time.Millisecond):
	case <-ctx.Done():
		return ctx.Err()
	}
	if p.Witness != "" {
		body, _ := json.Marshal(map[string]string{"traceId": ctx.TraceID})
		resp, err := http.Post(p.Witness, "application/json", bytes.NewReader(body))
		if err == nil {
			resp.Body.Close()
		}
	}
	return nil
}

func main() {
	var mu sync.Mutex
	runs := map[string]int{}
	ex := executor.New(os.Getenv("JOBFLOW_SIGNING_SECRET"))
	ex.Handle("echo", func(ctx *executor.Context) (string, error) {
		mu.Lock()
		runs[ctx.TraceID]++
		n := runs[ctx.TraceID]
		mu.Unlock()
		var params interface{}
		_ = ctx.Params(&params)
		out, err := json.Marshal(map[string]interface{}{
			"traceId": ctx.TraceID, "executionId": ctx.ExecutionID, "jobName": ctx.JobName,
			"handler": ctx.Handler, "triggerType": ctx.TriggerType,
			"fireTime": ctx.FireTime.UTC().Format(time.RFC3339), "shardStart": ctx.ShardStart,
			"shardEnd": ctx.ShardEnd, "shardCount": ctx.ShardCount, "shardStrategy": ctx.ShardStrategy,
			"retryCount": ctx.RetryCount, "timeoutSeconds": ctx.TimeoutSeconds, "jobParams": params,
			"dataRange": ctx.DataRange, "shardItems": ctx.ShardItems, "runs": n,
		})
		return string(out), err
	})
	ex.Handle("sleep", func(ctx *executor.Context) (string, error) {
		return "slept", sleepThenWitness(ctx)
	})
	ex.Handle("log", func(ctx *executor.Context) (string, error) {
		ctx.Log(executor.Info, "one")
		ctx.Log(executor.Warn, "two")
		ctx.Log(executor.Error, "three")
		return "logged", nil
	})
	ex.Handle("fail", func(ctx *executor.Context) (string, error) {
		return "", errors.New("failed on purpose")
	})
	ex.Handle("throw", func(ctx *executor.Context) (string, error) {
		panic("thrown on purpose")
	})
	ex.HandleBackground("background", func(ctx *executor.Context) (string, error) {
		return "done in background", sleepThenWitness(ctx)
	})
	port := os.Getenv("JOBFLOW_CONFORMANCE_PORT")
	// With $JOBFLOW_NACOS_ADDR set, registers as $JOBFLOW_NACOS_SERVICE (credentials from
	// $JOBFLOW_NACOS_USERNAME and _PASSWORD) for as long as the sample serves.
	if addr := os.Getenv("JOBFLOW_NACOS_ADDR"); addr != "" {
		n, _ := strconv.Atoi(port)
		r, err := executor.Register(executor.Nacos{ServerAddr: addr, ServiceName: os.Getenv("JOBFLOW_NACOS_SERVICE"),
			IP: "127.0.0.1", Port: n, Username: os.Getenv("JOBFLOW_NACOS_USERNAME"), Password: os.Getenv("JOBFLOW_NACOS_PASSWORD")})
		if err != nil {
			log.Fatal(err)
		}
		defer r.Close()
	}
	log.Fatal(http.ListenAndServe("127.0.0.1:"+port, ex))
}
