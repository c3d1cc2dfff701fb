"""sensevm.bytecode: the contract ``sensec`` targets, and the verifier that enforces it.

The instruction table, the program model, the decoder, the .snb format, the verifier and the
disassembler.

Imports only sensevm.base: the compiler depends on this layer and on base, and on nothing
else of sensevm."""
