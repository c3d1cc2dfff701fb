// Starts `sensec lsp` (over stdio) for .sns files; everything else is the server's.
"use strict";

const vscode = require("vscode");
const { LanguageClient, TransportKind } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const config = vscode.workspace.getConfiguration("sense.server");
  const command = config.get("command", "sensec");
  const args = config.get("args", ["lsp"]);
  const server = { command, args, transport: TransportKind.stdio };
  client = new LanguageClient(
    "sense",
    "Sense language server",
    { run: server, debug: server },
    {
      documentSelector: [{ scheme: "file", language: "sense" }, { scheme: "untitled", language: "sense" }],
    }
  );
  client.start().catch((err) => {
    vscode.window.showErrorMessage(
      `Sense: could not start '${command} ${args.join(" ")}' (${err.message}). ` +
        "Install it with pip install 'sense-compiled[lsp]', or set sense.server.command."
    );
  });
  context.subscriptions.push({ dispose: () => client && client.stop() });
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
