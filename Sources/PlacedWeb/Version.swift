/// placed-web's version: placed's (one source package, one version).
public let placedWebVersion = "0.1.0"
