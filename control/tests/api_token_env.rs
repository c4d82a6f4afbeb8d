//! `resolve_token`: the environment wins over the config file. Alone in its own test binary
//! because it changes the process environment.

use longhaul_control::api::{resolve_token, TOKEN_ENV};

#[test]
fn environment_overrides_the_config_token() {
    std::env::remove_var(TOKEN_ENV);
    assert_eq!(resolve_token(None), None);
    assert_eq!(resolve_token(Some("")), None);
    assert_eq!(resolve_token(Some("cfg")).as_deref(), Some("cfg"));
    std::env::set_var(TOKEN_ENV, "env");
    assert_eq!(resolve_token(Some("cfg")).as_deref(), Some("env"));
    assert_eq!(resolve_token(None).as_deref(), Some("env"));
    // An empty variable counts as unset.
    std::env::set_var(TOKEN_ENV, "");
    assert_eq!(resolve_token(Some("cfg")).as_deref(), Some("cfg"));
    std::env::remove_var(TOKEN_ENV);
}
