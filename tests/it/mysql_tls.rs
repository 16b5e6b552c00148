//! TLS to MySQL: `ssl-mode` and a custom CA given in `database.url`, against a MariaDB that
//! refuses every connection without TLS (`require_secure_transport=ON`). The test command
//! starts that server (scripts/lib.sh `start_tls_mariadb`) with a CA made for the run.

use std::sync::Arc;

use jobflow::config::{DatabaseSettings, Secret};
use serde_json::json;
use sqlx::{Connection, Row};

use crate::helpers::{Backend, TestApp, TestDb, job};

/// The TLS-only server (`mysql://user:pass@127.0.0.1:port`) and its CA file.
fn tls_server() -> Option<(String, String)> {
    match (
        std::env::var("JOBFLOW_TEST_TLS_MYSQL_URL"),
        std::env::var("JOBFLOW_TEST_TLS_CA"),
    ) {
        (Ok(url), Ok(ca)) => Some((url, ca)),
        _ if std::env::var_os("CI").is_some() => {
            panic!(
                "JOBFLOW_TEST_TLS_MYSQL_URL / JOBFLOW_TEST_TLS_CA unset: scripts/test.sh starts the TLS server"
            )
        }
        _ => {
            eprintln!(
                "SKIPPED mysql_tls: no TLS-only MariaDB (scripts/test.sh starts one and sets JOBFLOW_TEST_TLS_MYSQL_URL)"
            );
            None
        }
    }
}

async fn connect(url: String) -> Result<(), String> {
    let settings = DatabaseSettings {
        url: Secret::new(url),
        ..DatabaseSettings::default()
    };
    jobflow::store::connect(&settings)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_over_tls_with_a_custom_ca() {
    let Some((server, ca)) = tls_server() else {
        return;
    };

    // Without TLS the server refuses the connection.
    let plain = connect(format!("{server}/mysql?ssl-mode=disabled")).await;
    assert!(plain.is_err(), "a plain connection was accepted");

    // TLS, verified against the public roots only: the server's certificate is not trusted.
    let public_roots = connect(format!("{server}/mysql?ssl-mode=verify_identity")).await;
    assert!(
        public_roots.is_err(),
        "a certificate from an unknown CA was accepted"
    );

    // TLS verified against the custom CA, host name included.
    let with_ca = |db: &str| format!("{server}/{db}?ssl-mode=verify_identity&ssl-ca={ca}");
    let mut conn = sqlx::MySqlConnection::connect(&with_ca("mysql"))
        .await
        .expect("TLS connection with the custom CA");
    let cipher: String = sqlx::query("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        .fetch_one(&mut conn)
        .await
        .unwrap()
        .get(1);
    assert!(!cipher.is_empty(), "the session is not encrypted");
    let name = format!("jobflow_tls_{:016x}", rand::random::<u64>());
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE `{name}`")))
        .execute(&mut conn)
        .await
        .unwrap();

    // The real application migrates, stores and reads a job over that connection.
    let url = with_ca(&name);
    let unused = Arc::new(TestDb::create(Backend::Sqlite).await);
    let app = TestApp::spawn_with(unused, move |s| s.database.url = Secret::new(url)).await;
    let created = app.create_job(&job("over-tls")).await;
    assert_eq!(created["name"], json!("over-tls"));
    let (status, body) = app.get("/api/v1/jobs/over-tls").await;
    assert_eq!((status, &body["name"]), (200, &json!("over-tls")));
    app.stop().await;

    sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE `{name}`")))
        .execute(&mut conn)
        .await
        .unwrap();
}
