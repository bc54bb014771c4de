"""Lamina adapter for Google's Gemini API (``generateContent``): ``systemInstruction``,
user/model contents with function calls and responses, Gemini model limits, a calibrated
token estimate."""
