package executor

// Registration in a real Nacos server (rnacos, found through $RNACOS_BIN as the other suites
// find it).

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type rnacos struct {
	addr     string
	grpcPort int
	cmd      *exec.Cmd
	auth     []string
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startRnacos starts rnacos on fresh ports. rnacos 0.8.8 sometimes panics in its raft store on
// a first start: naming keeps working, but every login then answers "Mailbox has closed" (more
// often when a login comes before the store is wired up, so readiness is probed without one).
// A start that does not take its admin login is redone afresh, on new ports and a new data
// directory, as the other suites do.
func startRnacos(t *testing.T, auth ...string) *rnacos {
	bin := os.Getenv("RNACOS_BIN")
	if bin == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("RNACOS_BIN is not set (scripts/conformance.sh sets it)")
		}
		t.Skip("RNACOS_BIN is not set: the Nacos registration tests need rnacos")
	}
	for start := 1; ; start++ {
		n := launchRnacos(t, bin, auth)
		err := n.ready()
		if err == nil {
			return n
		}
		_ = n.cmd.Process.Kill()
		_ = n.cmd.Wait()
		if start == 3 {
			t.Fatalf("rnacos did not answer: %v", err)
		}
	}
}

func launchRnacos(t *testing.T, bin string, auth []string) *rnacos {
	port := freePort(t)
	for port+1000 > 65535 {
		port = freePort(t)
	}
	dir := t.TempDir()
	cmd := exec.Command(bin)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		fmt.Sprintf("RNACOS_HTTP_PORT=%d", port), fmt.Sprintf("RNACOS_GRPC_PORT=%d", port+1000),
		fmt.Sprintf("RNACOS_HTTP_CONSOLE_PORT=%d", freePort(t)),
		"RNACOS_DATA_DIR="+filepath.Join(dir, "data"), "RUST_LOG=warn")
	if len(auth) == 2 {
		cmd.Env = append(cmd.Env, "RNACOS_ENABLE_OPEN_API_AUTH=true",
			"RNACOS_INIT_ADMIN_USERNAME="+auth[0], "RNACOS_INIT_ADMIN_PASSWORD="+auth[1])
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return &rnacos{addr: fmt.Sprintf("127.0.0.1:%d", port), grpcPort: port + 1000, cmd: cmd, auth: auth}
}

// ready waits up to 20 s for rnacos to answer without a login, then for its admin login.
func (n *rnacos) ready() error {
	deadline := time.Now().Add(20 * time.Second)
	last := n.answers()
	for last != nil && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		last = n.answers()
	}
	if last != nil || len(n.auth) != 2 {
		return last
	}
	// The admin user is created through raft shortly after start.
	time.Sleep(500 * time.Millisecond)
	for {
		_, last = n.hosts("nobody")
		if last == nil || strings.Contains(last.Error(), "Mailbox") || time.Now().After(deadline) {
			return last
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// answers tells whether rnacos is up without a login: its HTTP port answers (with
// authentication on, any answer, a 403) and its gRPC port accepts.
func (n *rnacos) answers() error {
	resp, err := http.Get("http://" + n.addr + "/nacos/v1/ns/service/list?pageNo=1&pageSize=10")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if len(n.auth) != 2 && resp.StatusCode != 200 {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", n.grpcPort))
	if err != nil {
		return err
	}
	return conn.Close()
}

type host struct {
	IP        string            `json:"ip"`
	Port      int               `json:"port"`
	Healthy   bool              `json:"healthy"`
	Ephemeral bool              `json:"ephemeral"`
	Metadata  map[string]string `json:"metadata"`
}

func (n *rnacos) hosts(service string) ([]host, error) {
	q := url.Values{"serviceName": {service}}
	if len(n.auth) == 2 {
		resp, err := http.PostForm("http://"+n.addr+"/nacos/v1/auth/login",
			url.Values{"username": {n.auth[0]}, "password": {n.auth[1]}})
		if err != nil {
			return nil, err
		}
		var login struct {
			AccessToken string `json:"accessToken"`
		}
		said, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err := json.Unmarshal(said, &login); err != nil || login.AccessToken == "" {
			return nil, fmt.Errorf("login answered %q", said)
		}
		q.Set("accessToken", login.AccessToken)
	}
	resp, err := http.Get("http://" + n.addr + "/nacos/v1/ns/instance/list?" + q.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("%d: %s", resp.StatusCode, body)
	}
	var list struct {
		Hosts []host `json:"hosts"`
	}
	return list.Hosts, json.Unmarshal(body, &list)
}

func waitFor(t *testing.T, what string, check func() bool) {
	deadline := time.Now().Add(10 * time.Second)
	for !check() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestTheInstanceIsListedWithItsPrefixAndLeavesOnClose(t *testing.T) {
	n := startRnacos(t)
	r, err := Register(Nacos{ServerAddr: n.addr, ServiceName: "orders", IP: "127.0.0.1", Port: 18223, PathPrefix: "/jobs"})
	if err != nil {
		t.Fatal(err)
	}
	hosts, _ := n.hosts("orders")
	if len(hosts) != 1 || hosts[0].Port != 18223 || !hosts[0].Healthy || !hosts[0].Ephemeral ||
		hosts[0].Metadata["jobflow.path-prefix"] != "/jobs" {
		t.Fatalf("hosts = %+v", hosts)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the instance to leave", func() bool { h, _ := n.hosts("orders"); return len(h) == 0 })
}

func TestAForgottenInstanceRegistersAgainOnItsNextBeat(t *testing.T) {
	n := startRnacos(t)
	r, err := Register(Nacos{ServerAddr: "127.0.0.1:1," + n.addr, ServiceName: "kept", IP: "127.0.0.1", Port: 18225})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if h, _ := n.hosts("kept"); len(h) != 1 || len(h[0].Metadata) != 0 {
		t.Fatalf("hosts = %+v", h)
	}
	req, _ := http.NewRequest(http.MethodDelete, "http://"+n.addr+"/nacos/v1/ns/instance?serviceName=kept&ip=127.0.0.1&port=18225&ephemeral=true", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	r.mu.Lock()
	r.interval = 200 * time.Millisecond
	r.mu.Unlock()
	waitFor(t, "registered again", func() bool { h, _ := n.hosts("kept"); return len(h) == 1 && h[0].Healthy })
}

func TestWithAuthenticationAWrongPasswordIsRefusedAndTheRightOneRegisters(t *testing.T) {
	n := startRnacos(t, "jobflow", "s3cret-pass")
	_, err := Register(Nacos{ServerAddr: n.addr, ServiceName: "secured", IP: "127.0.0.1", Port: 18227, Username: "jobflow", Password: "wrong"})
	if err == nil || !strings.Contains(err.Error(), "login refused") {
		t.Fatalf("err = %v", err)
	}
	r, err := Register(Nacos{ServerAddr: n.addr, ServiceName: "secured", IP: "127.0.0.1", Port: 18227, Username: "jobflow", Password: "s3cret-pass"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if h, _ := n.hosts("secured"); len(h) != 1 || h[0].Port != 18227 {
		t.Fatalf("hosts = %+v", h)
	}
}

func TestAnUnreachableNacosFailsTheRegistrationNamingIt(t *testing.T) {
	dead := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	_, err := Register(Nacos{ServerAddr: dead, ServiceName: "nowhere", IP: "127.0.0.1", Port: 1, Timeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), dead) {
		t.Fatalf("err = %v", err)
	}
}
