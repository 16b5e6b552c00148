//! The deployment files. There is no Docker engine where the suites run, so the compose stack
//! is checked as far as that allows: its images, ports, addresses, healthchecks and start
//! order at the YAML level, and every JobFlow service's environment through the real
//! configuration loader (`jobflow check-config`). Also the Prometheus scrape targets and the
//! Grafana dashboard's metrics.

use serde_json::Value as Json;
use yaml_serde::Value;

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn compose() -> Value {
    let mut v: Value = yaml_serde::from_str(&read("docker-compose.yml")).unwrap();
    v.apply_merge().unwrap();
    // Merge keys nest (an anchor merged inside a merged mapping): apply until stable.
    for _ in 0..3 {
        v.apply_merge().unwrap();
    }
    v
}

fn service<'a>(c: &'a Value, name: &str) -> &'a Value {
    c["services"]
        .get(name)
        .unwrap_or_else(|| panic!("service {name} missing"))
}

fn env(s: &Value) -> Vec<(String, String)> {
    s["environment"]
        .as_mapping()
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    (
                        k.as_str().unwrap().to_string(),
                        v.as_str().map(str::to_string).unwrap_or_default(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `JOBFLOW__SECTION__KEY` names a real configuration key.
fn is_config_key(key: &str) -> bool {
    let Some(path) = key.strip_prefix("JOBFLOW__") else {
        return true;
    };
    let defaults = serde_json::to_value(jobflow::Settings::default()).unwrap();
    let mut node = &defaults;
    for part in path.to_lowercase().split("__") {
        match node.get(part) {
            Some(n) => node = n,
            None => return false,
        }
    }
    true
}

/// The service's fixed address on the compose network.
fn fixed_ip(s: &Value) -> String {
    let ip = s["networks"]["jobflow"]["ipv4_address"]
        .as_str()
        .expect("a fixed ipv4_address on the jobflow network");
    ip.parse::<std::net::Ipv4Addr>().expect("an IPv4 address");
    ip.to_string()
}

/// `stop_grace_period` in seconds (`40s`, `1m`).
fn grace_seconds(s: &Value) -> u64 {
    let raw = s["stop_grace_period"]
        .as_str()
        .expect("stop_grace_period set");
    match raw.strip_suffix('s') {
        Some(n) => n.parse().unwrap(),
        None => raw.strip_suffix('m').unwrap().parse::<u64>().unwrap() * 60,
    }
}

fn published(s: &Value) -> Vec<String> {
    s["ports"]
        .as_sequence()
        .map(|p| p.iter().map(|v| v.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

/// Values for the variables compose requires from the operator's shell.
const SHELL: [(&str, &str); 2] = [
    ("JOBFLOW_SIGNING_SECRET", "compose-signing-secret-4b1d"),
    (
        "JOBFLOW_ADMIN_TOKEN",
        "compose-admin-token-0123456789abcdef",
    ),
];

/// Compose's `${NAME}` / `${NAME:?message}` interpolation, with [`SHELL`] as the shell.
fn interpolate(value: &str) -> String {
    let Some(start) = value.find("${") else {
        return value.to_string();
    };
    let end = start + value[start..].find('}').expect("closed ${");
    let name = value[start + 2..end].split(':').next().unwrap();
    let with = SHELL
        .iter()
        .find(|(k, _)| *k == name)
        .unwrap_or_else(|| panic!("compose needs ${name} from the shell"))
        .1;
    format!(
        "{}{with}{}",
        &value[..start],
        interpolate(&value[end + 1..])
    )
}

#[test]
fn every_jobflow_service_passes_check_config() {
    let c = compose();
    let root = env!("CARGO_MANIFEST_DIR");
    let mut checked = 0;
    for (name, s) in c["services"].as_mapping().unwrap() {
        if s["build"]["target"].as_str() != Some("jobflow") {
            continue;
        }
        let name = name.as_str().unwrap();
        // The image's working directory is /app, holding a copy of config/.
        let args: Vec<String> = s["command"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().replace("/app/", &format!("{root}/")))
            .map(|a| {
                if a == "serve" {
                    "check-config".into()
                } else {
                    a
                }
            })
            .collect();
        assert!(
            args.contains(&"check-config".to_string()),
            "{name}: {args:?}"
        );
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_jobflow"));
        cmd.current_dir(root).args(&args).env_remove("RUST_LOG");
        for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("JOBFLOW")) {
            cmd.env_remove(k);
        }
        for (k, v) in env(s) {
            cmd.env(k, interpolate(&v));
        }
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for (_, secret) in SHELL {
            assert!(!stdout.contains(secret), "{name}: a secret was printed");
        }
        let effective: toml::Value = toml::from_str(&stdout).unwrap();
        assert_eq!(
            effective["discovery"]["advertise_ip"].as_str(),
            Some(fixed_ip(s).as_str()),
            "{name}"
        );
        assert_eq!(effective["discovery"]["mode"].as_str(), Some("nacos"));
        assert_eq!(
            effective["auth"]["tokens"][0]["role"].as_str(),
            Some("admin")
        );
        let grace = effective["server"]["shutdown_grace_seconds"]
            .as_integer()
            .unwrap() as u64;
        assert!(
            grace_seconds(s) > grace,
            "{name}: stop_grace_period <= {grace}s"
        );
        checked += 1;
    }
    assert_eq!(checked, 2, "both schedulers checked");
}

fn healthy_dependency(s: &Value, on: &str) -> bool {
    s["depends_on"][on]["condition"].as_str() == Some("service_healthy")
}

#[test]
fn compose_stack_is_complete_and_ordered() {
    let c = compose();
    let image = |name: &str| service(&c, name)["image"].as_str().unwrap().to_string();
    assert_eq!(image("mysql"), "mysql:8.4");
    assert!(image("nacos").starts_with("nacos/nacos-server:v2.5"));
    assert!(image("prometheus").starts_with("prom/prometheus:v3."));
    assert!(image("grafana").starts_with("grafana/grafana:12."));
    let nacos_ports = published(service(&c, "nacos"));
    for port in ["8848:8848", "9848:9848"] {
        assert!(
            nacos_ports.iter().any(|p| p == port),
            "nacos publishes {port}"
        );
    }
    assert_eq!(
        service(&c, "nacos")["environment"]["MODE"].as_str(),
        Some("standalone")
    );
    for infra in ["mysql", "nacos"] {
        assert!(
            service(&c, infra)["healthcheck"]["test"].is_sequence(),
            "{infra} healthcheck"
        );
    }
    for name in ["jobflow-1", "jobflow-2"] {
        let s = service(&c, name);
        assert_eq!(s["build"]["target"].as_str(), Some("jobflow"), "{name}");
        assert!(
            s["healthcheck"]["test"]
                .as_sequence()
                .unwrap()
                .iter()
                .any(|t| t.as_str().unwrap_or("").contains("/health/ready"))
        );
        assert!(
            healthy_dependency(s, "mysql") && healthy_dependency(s, "nacos"),
            "{name} starts after MySQL and Nacos are healthy"
        );
        let vars = env(s);
        for (k, _) in &vars {
            assert!(is_config_key(k), "{name}: {k} is not a configuration key");
        }
        let get = |k: &str| {
            vars.iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| panic!("{name}: {k} missing"))
        };
        assert_eq!(get("JOBFLOW__DISCOVERY__MODE"), "nacos");
        assert_eq!(get("JOBFLOW__NACOS__SERVER_ADDR"), "nacos:8848");
        assert!(get("JOBFLOW__DATABASE__URL").starts_with("mysql://"));
        assert_eq!(
            get("JOBFLOW__DISCOVERY__ADVERTISE_IP"),
            fixed_ip(s),
            "{name} advertises its own address on the compose network"
        );
        assert!(
            grace_seconds(s) > 30,
            "{name}: stop_grace_period must exceed the 30 s shutdown grace"
        );
        assert!(
            get("JOBFLOW__EXECUTOR__SIGNING_SECRET").starts_with("${"),
            "secrets come from the environment"
        );
        assert!(
            s["ports"]
                .as_sequence()
                .unwrap()
                .iter()
                .any(|p| p.as_str().unwrap().ends_with(":8080"))
        );
    }
    for name in ["demo-executor-1", "demo-executor-2"] {
        let s = service(&c, name);
        assert_eq!(s["build"]["target"].as_str(), Some("demo-executor"));
        assert!(healthy_dependency(s, "nacos"));
        assert!(s["healthcheck"]["test"].is_sequence());
        let vars = env(s);
        for k in [
            "NACOS_SERVER_ADDR",
            "DEMO_SERVICE",
            "DEMO_ADVERTISE_IP",
            "JOBFLOW_SIGNING_SECRET",
        ] {
            assert!(vars.iter().any(|(key, _)| key == k), "{name}: {k} missing");
        }
        let advertised = vars.iter().find(|(k, _)| k == "DEMO_ADVERTISE_IP").unwrap();
        assert_eq!(
            advertised.1,
            fixed_ip(s),
            "{name} advertises its own address"
        );
    }
    // The admin token is referenced, never written down.
    let extra: toml::Value = toml::from_str(&read("config/compose.toml")).unwrap();
    let token = &extra["auth"]["tokens"][0];
    assert_eq!(token["token_env"].as_str(), Some("JOBFLOW_ADMIN_TOKEN"));
    assert!(token.get("token").is_none());
}

#[test]
fn prometheus_scrapes_both_instances() {
    let p: Value = yaml_serde::from_str(&read("deploy/prometheus/prometheus.yml")).unwrap();
    let job = &p["scrape_configs"][0];
    assert_eq!(job["metrics_path"].as_str(), Some("/metrics"));
    let targets: Vec<&str> = job["static_configs"][0]["targets"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(targets, ["jobflow-1:8080", "jobflow-2:8080"]);
    assert_eq!(
        p["rule_files"][0].as_str(),
        Some("/etc/prometheus/alerts.yml")
    );
    let c = compose();
    let mounted = service(&c, "prometheus")["volumes"]
        .as_sequence()
        .unwrap()
        .iter()
        .any(|v| {
            v.as_str() == Some("./deploy/prometheus/alerts.yml:/etc/prometheus/alerts.yml:ro")
        });
    assert!(
        mounted,
        "compose mounts the alert rules where the configuration names them"
    );
}

#[test]
fn dashboard_queries_metrics_jobflow_exports() {
    let d: Json = serde_json::from_str(&read("deploy/grafana/jobflow-dashboard.json")).unwrap();
    let panels = d["panels"].as_array().unwrap();
    let exprs: Vec<String> = panels
        .iter()
        .flat_map(|p| {
            p["targets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["expr"].as_str().unwrap().to_string())
        })
        .collect();
    let titles: Vec<&str> = panels
        .iter()
        .map(|p| p["title"].as_str().unwrap())
        .collect();
    for wanted in [
        "Executions per minute, by status",
        "Executions per minute, per job",
        "Mean execution duration",
        "Failure rate",
        "Fire delay p50 / p95 / p99",
        "Executor calls in flight and backlog",
        "Up",
    ] {
        assert!(
            titles.iter().any(|t| t.starts_with(wanted)),
            "panel {wanted} missing"
        );
    }
    for q in ["0.5", "0.95", "0.99"] {
        let wanted = format!(
            "histogram_quantile({q}, sum by (le) (rate(scheduler_fire_delay_seconds_bucket[5m])))"
        );
        assert!(exprs.contains(&wanted), "{wanted}");
    }
    let exported = [
        "job_execution_total",
        "job_execution_duration_seconds_sum",
        "job_execution_duration_seconds_count",
        "job_execution_failures_total",
        "scheduler_fire_delay_seconds_bucket",
        "scheduler_owned_jobs",
        "scheduler_duplicate_dispatch_skipped_total",
        "scheduler_misfires_total",
        "scheduler_instances",
        "scheduler_compensation_leader",
        "scheduler_nacos_up",
        "scheduler_stepped_aside",
        "scheduler_calls_in_flight",
        "scheduler_backlog",
        "alert_deliveries_total",
    ];
    for e in &exprs {
        let names: Vec<&str> = e
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| {
                w.starts_with("job_execution")
                    || w.starts_with("scheduler_")
                    || w.starts_with("alert_")
            })
            .collect();
        assert!(
            !names.is_empty() || e.starts_with("up{"),
            "{e} queries no JobFlow metric"
        );
        for n in names {
            assert!(exported.contains(&n), "{n} is not a metric JobFlow exports");
        }
        // Prometheus renames a target's own `job` label to `exported_job`: per-job series
        // are `job_name` (docs/operations.md, "Observability"); `job` is only the scrape job.
        assert!(
            !e.contains("by (job)") && !e.contains("{job=~"),
            "{e} uses the label job"
        );
    }
    assert_eq!(
        d["templating"]["list"][0]["query"].as_str(),
        Some("label_values(job_execution_total, job_name)")
    );
}

/// The manifests in deploy/kubernetes, by kind.
fn manifests() -> Vec<Value> {
    let dir = format!("{}/deploy/kubernetes", env!("CARGO_MANIFEST_DIR"));
    let mut docs = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        docs.push(yaml_serde::from_str(&text).unwrap());
    }
    docs
}

fn manifest(docs: &[Value], kind: &str) -> Value {
    docs.iter()
        .find(|d| d["kind"].as_str() == Some(kind))
        .unwrap_or_else(|| panic!("no {kind} in deploy/kubernetes"))
        .clone()
}

#[test]
fn kubernetes_manifests_fit_together_and_their_configuration_loads() {
    let docs = manifests();
    let deployment = manifest(&docs, "Deployment");
    let pod = &deployment["spec"]["template"];
    let pod_labels = &pod["metadata"]["labels"];
    for kind in ["Service", "PodDisruptionBudget"] {
        let m = manifest(&docs, kind);
        let selector = match kind {
            "Service" => &m["spec"]["selector"],
            _ => &m["spec"]["selector"]["matchLabels"],
        };
        for (k, v) in selector.as_mapping().unwrap() {
            assert_eq!(&pod_labels[k], v, "{kind} selects the scheduler pods");
        }
    }
    let service = manifest(&docs, "Service");
    let monitor = manifest(&docs, "ServiceMonitor");
    for (k, v) in monitor["spec"]["selector"]["matchLabels"]
        .as_mapping()
        .unwrap()
    {
        assert_eq!(
            &service["metadata"]["labels"][k], v,
            "ServiceMonitor selects the Service"
        );
    }
    let port = monitor["spec"]["endpoints"][0]["port"].as_str().unwrap();
    assert!(
        service["spec"]["ports"]
            .as_sequence()
            .unwrap()
            .iter()
            .any(|p| p["name"].as_str() == Some(port))
    );
    assert_eq!(
        monitor["spec"]["endpoints"][0]["path"].as_str(),
        Some("/metrics")
    );

    let container = &pod["spec"]["containers"][0];
    let env = container["env"].as_sequence().unwrap();
    let ip = env
        .iter()
        .find(|e| e["name"].as_str() == Some("JOBFLOW__DISCOVERY__ADVERTISE_IP"))
        .expect("the advertised address is set");
    assert_eq!(
        ip["valueFrom"]["fieldRef"]["fieldPath"].as_str(),
        Some("status.podIP")
    );
    assert!(
        container["lifecycle"]["preStop"].is_mapping(),
        "preStop hook"
    );

    // The ConfigMap's file and the pod's environment, through the real configuration loader.
    let config_map = manifest(&docs, "ConfigMap");
    let secret = manifest(&docs, "Secret");
    let dir = tempfile::tempdir().unwrap();
    let mount = container["volumeMounts"][0]["mountPath"].as_str().unwrap();
    for (file, body) in config_map["data"].as_mapping().unwrap() {
        std::fs::write(
            dir.path().join(file.as_str().unwrap()),
            body.as_str().unwrap(),
        )
        .unwrap();
    }
    let args: Vec<String> = container["args"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|a| {
            a.as_str()
                .unwrap()
                .replace(mount, dir.path().to_str().unwrap())
        })
        .map(|a| {
            if a == "serve" {
                "check-config".into()
            } else {
                a
            }
        })
        .collect();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_jobflow"));
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(&args)
        .env_remove("RUST_LOG");
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("JOBFLOW")) {
        cmd.env_remove(k);
    }
    for e in env {
        let name = e["name"].as_str().unwrap();
        let from = &e["valueFrom"];
        let value = if from["fieldRef"].is_mapping() {
            "10.244.1.17".to_string()
        } else {
            let key = from["secretKeyRef"]["key"].as_str().unwrap();
            assert_eq!(from["secretKeyRef"]["name"], secret["metadata"]["name"]);
            assert!(secret["stringData"][key].is_string(), "Secret has {key}");
            format!("{key}-value-0123456789")
        };
        cmd.env(name, value);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !stdout.contains("-value-0123456789"),
        "a secret was printed"
    );
    let effective: toml::Value = toml::from_str(&stdout).unwrap();
    assert_eq!(
        effective["discovery"]["advertise_ip"].as_str(),
        Some("10.244.1.17")
    );
    assert_eq!(effective["discovery"]["mode"].as_str(), Some("nacos"));
    let grace = effective["server"]["shutdown_grace_seconds"]
        .as_integer()
        .unwrap();
    let pre_stop: i64 = container["lifecycle"]["preStop"]["exec"]["command"][1]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let termination = pod["spec"]["terminationGracePeriodSeconds"]
        .as_i64()
        .unwrap();
    assert!(
        termination > grace + pre_stop,
        "terminationGracePeriodSeconds {termination} must exceed preStop {pre_stop} + shutdown grace {grace}"
    );

    // With the Secret as shipped (empty), JobFlow refuses to start: no default credentials.
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_jobflow"));
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(&args)
        .env_remove("RUST_LOG");
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("JOBFLOW")) {
        cmd.env_remove(k);
    }
    cmd.env("JOBFLOW_ADMIN_TOKEN", "");
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("auth.tokens"));
}

#[test]
fn images_run_as_non_root_from_a_multi_stage_build() {
    let dockerfile = read("Dockerfile");
    // scripts/check-deploy.sh runs this command as written.
    assert!(dockerfile.contains(
        "RUN cargo build --release --locked -p jobflow --bin jobflow -p jobflow-demo-executor --bin jobflow-demo-executor"
    ));
    let external = dockerfile
        .lines()
        .filter(|l| l.starts_with("FROM ") && !l.starts_with("FROM runtime-base"));
    for from in external {
        assert!(
            from.contains("trixie"),
            "a Debian base with security support: {from}"
        );
    }
    assert!(dockerfile.matches("FROM ").count() >= 3, "multi-stage");
    assert!(dockerfile.contains("AS jobflow") && dockerfile.contains("AS demo-executor"));
    assert!(dockerfile.contains("USER 10001"));
    assert!(dockerfile.contains("HEALTHCHECK"));
}
