//! The deployment files, checked at the YAML/JSON level (no Docker engine is needed): the
//! compose stack's images, ports, environment keys, healthchecks and start order, the
//! Prometheus scrape targets and the Grafana dashboard's metrics.

use serde_json::Value as Json;
use serde_yaml::Value;

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn compose() -> Value {
    let mut v: Value = serde_yaml::from_str(&read("docker-compose.yml")).unwrap();
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

fn healthy_dependency(s: &Value, on: &str) -> bool {
    s["depends_on"][on]["condition"].as_str() == Some("service_healthy")
}

#[test]
fn compose_stack_is_complete_and_ordered() {
    let c = compose();
    assert!(
        service(&c, "mysql")["image"]
            .as_str()
            .unwrap()
            .starts_with("mysql:8")
    );
    assert!(
        service(&c, "nacos")["image"]
            .as_str()
            .unwrap()
            .starts_with("nacos/nacos-server:v2")
    );
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
            name,
            "containers advertise their service name"
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
    }
    assert!(
        service(&c, "prometheus")["image"]
            .as_str()
            .unwrap()
            .starts_with("prom/prometheus")
    );
    assert!(
        service(&c, "grafana")["image"]
            .as_str()
            .unwrap()
            .starts_with("grafana/grafana")
    );
    // The admin token is referenced, never written down.
    let extra: toml::Value = toml::from_str(&read("config/compose.toml")).unwrap();
    let token = &extra["auth"]["tokens"][0];
    assert_eq!(token["token_env"].as_str(), Some("JOBFLOW_ADMIN_TOKEN"));
    assert!(token.get("token").is_none());
}

#[test]
fn prometheus_scrapes_both_instances() {
    let p: Value = serde_yaml::from_str(&read("deploy/prometheus/prometheus.yml")).unwrap();
    let job = &p["scrape_configs"][0];
    assert_eq!(job["metrics_path"].as_str(), Some("/metrics"));
    let targets: Vec<&str> = job["static_configs"][0]["targets"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(targets, ["jobflow-1:8080", "jobflow-2:8080"]);
}

#[test]
fn dashboard_queries_metrics_jobflow_exports() {
    let d: Json = serde_json::from_str(&read("deploy/grafana/jobflow-dashboard.json")).unwrap();
    let exprs: Vec<String> = d["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| {
            p["targets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["expr"].as_str().unwrap().to_string())
        })
        .collect();
    let titles: Vec<&str> = d["panels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["title"].as_str().unwrap())
        .collect();
    for wanted in [
        "Executions per minute",
        "Mean execution duration",
        "Failure rate",
    ] {
        assert!(
            titles.iter().any(|t| t.starts_with(wanted)),
            "panel {wanted} missing"
        );
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
    ];
    for e in &exprs {
        let names: Vec<&str> = e
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with("job_execution") || w.starts_with("scheduler_"))
            .collect();
        assert!(!names.is_empty(), "{e} queries no JobFlow metric");
        for n in names {
            assert!(exported.contains(&n), "{n} is not a metric JobFlow exports");
        }
    }
}

#[test]
fn images_run_as_non_root_from_a_multi_stage_build() {
    let dockerfile = read("Dockerfile");
    assert!(dockerfile.matches("FROM ").count() >= 3, "multi-stage");
    assert!(dockerfile.contains("AS jobflow") && dockerfile.contains("AS demo-executor"));
    assert!(dockerfile.contains("USER 10001"));
    assert!(dockerfile.contains("HEALTHCHECK"));
}
