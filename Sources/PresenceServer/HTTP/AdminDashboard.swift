/// The operator dashboard served at `GET /.admin/` (and `/.admin`): a web page in `Dashboard/`
/// (`index.html`, `dashboard.css`, `chart.js`, `nodes.js`, `dashboard.js`), its stylesheet and scripts served
/// beside it because the server's security headers (lws's best-practice CSP: `script-src 'self';
/// style-src 'self'`) forbid inline ones. Nothing is fetched from anywhere else; no frameworks.
///
/// The files are package resources embedded at build time (`.embedInCode` in `Package.swift`:
/// SwiftPM generates `PackageResources` with their bytes), not loaded with `Bundle.module` at run
/// time: that looks for a `…_PresenceServer.resources` directory beside the executable and then in
/// the build tree, and stops the process when neither is there, which is the case for an installed
/// binary (`make install`, the container image, the systemd unit). Embedded, the binary is the
/// whole server.
///
/// The page reads the admin credential from its own `?auth=` parameter and sends it as
/// `Authorization: Bearer …` on every API fetch (`dashboard.js` says what it polls and the hooks
/// tests use). The assets hold no data, so they are served without a credential (a `<script src>`
/// cannot send one).
enum AdminDashboard {
    /// The static asset at `path`, served to anyone: none holds data. Nil for any other path.
    static func asset(_ path: String) -> (contentType: String, body: String)? {
        switch path {
        case "/.admin/dashboard.css": ("text/css; charset=utf-8", stylesheet)
        case "/.admin/dashboard.js": ("text/javascript; charset=utf-8", script)
        case "/.admin/chart.js": ("text/javascript; charset=utf-8", chartScript)
        case "/.admin/nodes.js": ("text/javascript; charset=utf-8", nodesScript)
        default: nil
        }
    }

    static let html = String(decoding: PackageResources.index_html, as: UTF8.self)
    static let stylesheet = String(decoding: PackageResources.dashboard_css, as: UTF8.self)
    static let script = String(decoding: PackageResources.dashboard_js, as: UTF8.self)
    static let chartScript = String(decoding: PackageResources.chart_js, as: UTF8.self)
    static let nodesScript = String(decoding: PackageResources.nodes_js, as: UTF8.self)
}
