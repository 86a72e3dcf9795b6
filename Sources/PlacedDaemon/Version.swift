public let placedVersion = "0.1.0"
