// A --config file becomes command-line arguments placed before the real ones, so flags override it.
PresenceServerCommand.main(ConfigFile.expand(Array(CommandLine.arguments.dropFirst())))
