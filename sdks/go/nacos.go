package executor

// Registering an executor in Nacos, so schedulers that discover executors there find it
// (docs/executors/go.md, "Registering in Nacos").
//
// The instance is ephemeral: Nacos keeps it while beats arrive (every 5 s, or what the server
// asks for) and drops it about 30 s after they stop, so a process that dies leaves no stale
// address; Close removes it at once. Spoken over Nacos' HTTP open API (v1), which Nacos 1 and 2
// and rnacos serve, and Nacos 3.2 and later through its legacy adapter; with authentication
// on, a login gives the access token, renewed before it expires. A failed beat is logged and
// tried again at the next interval; an instance Nacos no longer knows (a Nacos restart) is
// registered again.

import (
	"encoding/json"
	"errors"
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

// Nacos says where and as what to register.
type Nacos struct {
	// ServerAddr is one address or several, comma-separated ("nacos:8848" or a URL).
	ServerAddr  string
	ServiceName string
	// IP and Port are where schedulers reach this executor.
	IP   string
	Port int
	// Namespace defaults to public (Nacos' default namespace, whose id is empty).
	Namespace string
	// Group defaults to DEFAULT_GROUP.
	Group string
	// PathPrefix is announced as jobflow.path-prefix when it is not /internal/job.
	PathPrefix         string
	Username, Password string
	// Timeout of each request to Nacos (default 3 s).
	Timeout time.Duration
	Logger  *log.Logger
}

// Registration is a registered instance; Close it on shutdown.
type Registration struct {
	cfg      Nacos
	urls     []string
	client   *http.Client
	metadata map[string]string

	mu       sync.Mutex
	token    string
	renewAt  time.Time
	interval time.Duration

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// Register registers the instance and starts its beats; it fails when Nacos refuses or
// cannot be reached at any of its addresses.
func Register(cfg Nacos) (*Registration, error) {
	if cfg.Namespace == "public" {
		cfg.Namespace = ""
	}
	if cfg.Group == "" {
		cfg.Group = "DEFAULT_GROUP"
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 3 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = log.Default()
	}
	r := &Registration{
		cfg:      cfg,
		client:   &http.Client{Timeout: cfg.Timeout},
		metadata: map[string]string{},
		interval: 5 * time.Second,
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	for _, part := range strings.Split(cfg.ServerAddr, ",") {
		part = strings.TrimRight(strings.TrimSpace(part), "/")
		if part == "" {
			continue
		}
		if !strings.Contains(part, "://") {
			part = "http://" + part
		}
		r.urls = append(r.urls, part)
	}
	if len(r.urls) == 0 {
		return nil, errors.New("nacos: ServerAddr names no server")
	}
	if cfg.PathPrefix != "" && cfg.PathPrefix != DefaultPathPrefix {
		r.metadata["jobflow.path-prefix"] = cfg.PathPrefix
	}
	if err := r.register(); err != nil {
		return nil, err
	}
	go r.beats()
	return r, nil
}

// Close stops the beats and removes the instance (best effort: Nacos drops it anyway once
// the beats stop).
func (r *Registration) Close() error {
	r.once.Do(func() { close(r.stop) })
	<-r.done
	_, err := r.request(http.MethodDelete, "/nacos/v1/ns/instance", r.instance())
	return err
}

func (r *Registration) instance() url.Values {
	v := url.Values{}
	v.Set("serviceName", r.cfg.ServiceName)
	v.Set("groupName", r.cfg.Group)
	v.Set("ip", r.cfg.IP)
	v.Set("port", strconv.Itoa(r.cfg.Port))
	v.Set("ephemeral", "true")
	if r.cfg.Namespace != "" {
		v.Set("namespaceId", r.cfg.Namespace)
	}
	return v
}

func (r *Registration) register() error {
	v := r.instance()
	meta, _ := json.Marshal(r.metadata)
	v.Set("weight", "1.0")
	v.Set("enabled", "true")
	v.Set("healthy", "true")
	v.Set("metadata", string(meta))
	_, err := r.request(http.MethodPost, "/nacos/v1/ns/instance", v)
	return err
}

func (r *Registration) beat() error {
	beat, _ := json.Marshal(map[string]interface{}{
		"serviceName": r.cfg.Group + "@@" + r.cfg.ServiceName, "ip": r.cfg.IP,
		"port": r.cfg.Port, "cluster": "DEFAULT", "weight": 1.0, "metadata": r.metadata,
		"scheduled": true,
	})
	v := r.instance()
	v.Set("beat", string(beat))
	body, err := r.request(http.MethodPut, "/nacos/v1/ns/instance/beat", v)
	if err != nil {
		return err
	}
	var answer struct {
		Code     int     `json:"code"`
		Interval float64 `json:"clientBeatInterval"`
	}
	if json.Unmarshal(body, &answer) != nil {
		return nil
	}
	if answer.Interval > 0 {
		r.mu.Lock()
		r.interval = time.Duration(answer.Interval) * time.Millisecond
		r.mu.Unlock()
	}
	if answer.Code == 20404 {
		// Nacos forgot the instance (it restarted, or the beats stopped long enough).
		r.cfg.Logger.Print("jobflow executor: Nacos no longer knew this instance; registering again")
		return r.register()
	}
	return nil
}

func (r *Registration) beats() {
	defer close(r.done)
	for {
		r.mu.Lock()
		interval := r.interval
		r.mu.Unlock()
		select {
		case <-r.stop:
			return
		case <-time.After(interval):
		}
		if err := r.beat(); err != nil {
			r.cfg.Logger.Printf("jobflow executor: Nacos beat failed; trying again in %s: %v", interval, err)
		}
	}
}

// accessToken logs in when a username is set, and again before the token expires.
func (r *Registration) accessToken(base string) (string, error) {
	if r.cfg.Username == "" {
		return "", nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.token != "" && time.Now().Before(r.renewAt) {
		return r.token, nil
	}
	form := url.Values{"username": {r.cfg.Username}, "password": {r.cfg.Password}}
	resp, err := r.client.PostForm(base+"/nacos/v1/auth/login", form)
	if err != nil {
		return "", fmt.Errorf("nacos login at %s: %w", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("nacos login refused (%d): check the username and password", resp.StatusCode)
	}
	var answer struct {
		AccessToken string  `json:"accessToken"`
		TokenTTL    float64 `json:"tokenTtl"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return "", fmt.Errorf("nacos login at %s: %w", base, err)
	}
	if answer.TokenTTL <= 0 {
		answer.TokenTTL = 18000
	}
	r.token = answer.AccessToken
	r.renewAt = time.Now().Add(time.Duration(answer.TokenTTL*0.8) * time.Second)
	return r.token, nil
}

// request asks each address in turn; the first answer counts.
func (r *Registration) request(method, path string, params url.Values) ([]byte, error) {
	var failures []string
	for _, base := range r.urls {
		token, err := r.accessToken(base)
		if err != nil {
			if strings.Contains(err.Error(), "refused") {
				return nil, err
			}
			failures = append(failures, err.Error())
			continue
		}
		q := url.Values{}
		for k, v := range params {
			q[k] = v
		}
		if token != "" {
			q.Set("accessToken", token)
		}
		req, err := http.NewRequest(method, base+path+"?"+q.Encode(), nil)
		if err != nil {
			return nil, err
		}
		resp, err := r.client.Do(req)
		if err != nil {
			failures = append(failures, fmt.Sprintf("%s: %v", base, err))
			continue
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			if resp.StatusCode == http.StatusForbidden {
				r.mu.Lock()
				r.token = ""
				r.mu.Unlock()
			}
			detail := string(body)
			if len(detail) > 200 {
				detail = detail[:200]
			}
			return nil, fmt.Errorf("nacos: %s %s refused by %s (%d): %s", method, path, base, resp.StatusCode, detail)
		}
		return body, nil
	}
	return nil, fmt.Errorf("nacos: no server answered %s %s: %s", method, path, strings.Join(failures, "; "))
}
